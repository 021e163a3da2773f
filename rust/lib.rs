//! fastcollate's native module. `core` holds the algorithms and never touches Python; `py`
//! (behind the default `python` feature) converts between Python objects and the core.

// Private: the binding layer is the crate's only user of the core. Without it (`cargo test
// --no-default-features`) only the core's own tests call it, so nothing there is dead code.
#[cfg_attr(not(feature = "python"), allow(dead_code))]
mod core;

#[cfg(feature = "python")]
mod py;

#[cfg(feature = "python")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
