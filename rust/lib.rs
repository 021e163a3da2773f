//! fastcollate's native module. `core` holds the algorithms and never touches Python; `py`
//! (behind the default `python` feature) converts between Python objects and the core.

pub mod core;

#[cfg(feature = "python")]
mod py;

#[cfg(feature = "python")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
