//! Gives this crate PyO3's interpreter cfgs (`Py_GIL_DISABLED`, `Py_LIMITED_API`, `PyPy`, ...):
//! the binding layer's raw-FFI fast paths are compiled only where they are sound (a build with
//! a GIL, the full C API), and the safe paths everywhere else.

fn main() {
    #[cfg(feature = "python")]
    pyo3_build_config::use_pyo3_cfgs();
}
