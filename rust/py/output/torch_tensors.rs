//! torch tensors made straight from the core's output buffers through torch's DLPack exchange
//! table (`convert::dlpack`): one C call per tensor in place of `torch.from_numpy` of a numpy
//! array made first. The tensor owns the Rust buffer, as the numpy array would have: nothing is
//! copied, and torch frees it (through the deleter here) when the tensor's storage dies.
//!
//! Only CPU tensors are made, of the four dtypes the core gives (bool, int64, float32,
//! float64), C-contiguous, of one or two dimensions, and only in place of `torch.from_numpy`:
//! with a torch without the table, or any other conversion, the numpy array is made
//! (`output::numpy`) and converted.

use std::ffi::c_void;
use std::ptr;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use crate::core::pad::{Data, Layout, Output};

use super::numpy_arrays::output_to_py;
use crate::py::convert::dlpack::{
    to_py_object, DataType, Device, ManagedTensor, Tensor, ToPyObject, Version, BOOL, CPU,
    DLPACK_MAJOR, FLOAT, INT,
};
use crate::py::convert::torch::torch_tensor_type;

static FROM_NUMPY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// Whether `convert` is `torch.from_numpy` itself: the conversion this file's tensors stand
/// in for (they are what it gives for the numpy array of the same buffer, without the array).
pub fn is_torch_from_numpy(convert: &Bound<'_, PyAny>) -> bool {
    let py = convert.py();
    if let Some(from_numpy) = FROM_NUMPY.get(py) {
        return from_numpy.bind(py).is(convert);
    }
    // Looked up once torch is imported (a torch function can only exist after that).
    let Some(from_numpy) = torch_tensor_type(py)
        .and_then(|_| py.import("torch").ok())
        .and_then(|torch| torch.getattr("from_numpy").ok())
    else {
        return false;
    };
    FROM_NUMPY
        .get_or_init(py, || from_numpy.unbind())
        .bind(py)
        .is(convert)
}

/// A `ManagedTensor` with the shape, strides and buffer it points into, kept together on the
/// heap (their addresses do not move) until torch calls `release`.
#[repr(C)]
struct Owned<T> {
    managed: ManagedTensor,
    shape: [i64; 2],
    strides: [i64; 2],
    values: Vec<T>,
}

/// The deleter torch calls once, when the tensor's storage dies (on any thread, attached or
/// not: it only frees Rust memory).
unsafe extern "C" fn release<T>(managed: *mut ManagedTensor) {
    // SAFETY: `manager_ctx` is the `Box<Owned<T>>` `tensor_from_vec` leaked for this tensor;
    // torch calls the deleter once.
    unsafe {
        if !managed.is_null() {
            drop(Box::from_raw((*managed).manager_ctx.cast::<Owned<T>>()));
        }
    }
}

/// The output's dimensions (the first `count` of the array), or None for a ragged output.
fn dims(layout: &Layout) -> Option<([usize; 2], usize)> {
    match layout {
        Layout::Scalar { rows } => Some(([*rows, 0], 1)),
        Layout::Matrix { rows, columns } => Some(([*rows, *columns], 2)),
        Layout::Ragged { .. } => None,
    }
}

fn tensor_from_vec<'py, T>(
    py: Python<'py>,
    make: ToPyObject,
    values: Vec<T>,
    dims: &[usize],
    dtype: DataType,
) -> PyResult<Bound<'py, PyAny>> {
    let too_big = || PyValueError::new_err("an output dimension is past int64");
    let mut shape = [0i64; 2];
    for (to, &from) in shape.iter_mut().zip(dims) {
        *to = i64::try_from(from).map_err(|_| too_big())?;
    }
    // C order; the buffer holds `shape`'s product of values (the core's layout). An empty
    // matrix gets zero strides, as the numpy array of it has (ndarray's), so that the tensor
    // is the one `torch.from_numpy` would give.
    let strides = match dims {
        [_] => [1, 0],
        [_, _] if !dims.contains(&0) => [shape[1], 1],
        _ => [0, 0],
    };
    let mut owned = Box::new(Owned {
        managed: ManagedTensor {
            version: Version {
                major: DLPACK_MAJOR,
                minor: 0,
            },
            manager_ctx: ptr::null_mut(),
            deleter: Some(release::<T>),
            flags: 0, // writeable, not a copy
            dl_tensor: Tensor {
                data: ptr::null_mut(),
                device: Device {
                    device_type: CPU,
                    device_id: 0,
                },
                ndim: dims.len() as i32,
                dtype,
                shape: ptr::null_mut(),
                strides: ptr::null_mut(),
                byte_offset: 0,
            },
        },
        shape,
        strides,
        values,
    });
    owned.managed.dl_tensor.data = owned.values.as_mut_ptr().cast();
    owned.managed.dl_tensor.shape = owned.shape.as_mut_ptr();
    owned.managed.dl_tensor.strides = owned.strides.as_mut_ptr();
    let owned = Box::into_raw(owned);
    let mut out: *mut c_void = ptr::null_mut();
    // SAFETY: `owned` is a live, fully initialised `ManagedTensor` (its first field) whose
    // pointers point into the same allocation; torch takes it over, calling `release` when its
    // storage dies. The interpreter is attached, as the function needs (it makes a Python
    // object).
    unsafe {
        (*owned).managed.manager_ctx = owned.cast();
        if make(ptr::addr_of_mut!((*owned).managed), &mut out) != 0 || out.is_null() {
            // torch failed before (or while) taking the buffer: whether its deleter ran is not
            // known, so the buffer is left as it is (a leak on a path torch never takes for
            // these CPU tensors) rather than risk freeing it twice.
            return Err(PyErr::take(py).unwrap_or_else(|| {
                PyValueError::new_err("torch could not make a tensor of a padded output")
            }));
        }
        Ok(Bound::from_owned_ptr(py, out.cast()))
    }
}

/// `convert` applied to the numpy array of `output` (not ragged), as `to_tensor` options
/// ask; with `direct` (`convert` is `torch.from_numpy`, see `is_torch_from_numpy`) the tensor
/// is made straight from the buffer when this torch has the exchange table.
pub fn converted<'py>(
    py: Python<'py>,
    output: Output,
    convert: &Bound<'py, PyAny>,
    direct: bool,
) -> PyResult<Bound<'py, PyAny>> {
    if direct {
        if let (Some(make), Some((dims, count))) = (to_py_object(py), dims(&output.layout)) {
            let dims = &dims[..count];
            let dtype = |code, bits| DataType {
                code,
                bits,
                lanes: 1,
            };
            return match output.data {
                Data::Bool(v) => tensor_from_vec(py, make, v, dims, dtype(BOOL, 8)),
                Data::I64(v) => tensor_from_vec(py, make, v, dims, dtype(INT, 64)),
                Data::F32(v) => tensor_from_vec(py, make, v, dims, dtype(FLOAT, 32)),
                Data::F64(v) => tensor_from_vec(py, make, v, dims, dtype(FLOAT, 64)),
            };
        }
    }
    convert.call1((output_to_py(py, output)?,))
}
