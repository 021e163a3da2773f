//! Gives this crate PyO3's interpreter cfgs (`Py_GIL_DISABLED`, `Py_LIMITED_API`, `PyPy`, ...)
//! and one of its own, `raw_int_reads`: set where the binding layer's raw-FFI int reads
//! (`rust/py/convert/ints.rs`) are sound — CPython with a GIL and the full C API, that is none
//! of `Py_GIL_DISABLED`, `Py_LIMITED_API`, `PyPy`, `GraalPy`, `RustPython` — and unset
//! everywhere else, where the same functions take the safe way. The condition is decided here
//! once; the code only asks `cfg(raw_int_reads)`.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(raw_int_reads)");
    #[cfg(feature = "python")]
    python_cfgs();
}

#[cfg(feature = "python")]
fn python_cfgs() {
    pyo3_build_config::use_pyo3_cfgs();
    // The interpreters (and ABIs) the raw reads are not written for, as PyO3 names their cfgs.
    const NOT_RAW: [&str; 5] = [
        "Py_GIL_DISABLED",
        "Py_LIMITED_API",
        "PyPy",
        "GraalPy",
        "RustPython",
    ];
    let outputs = pyo3_build_config::get().build_script_outputs();
    let unsound = outputs.iter().any(|line| {
        line.strip_prefix("cargo:rustc-cfg=")
            .is_some_and(|cfg| NOT_RAW.contains(&cfg))
    });
    if !unsound {
        println!("cargo::rustc-cfg=raw_int_reads");
    }
}
