//! torch tensors made straight from the core's output buffers, through the C function table
//! torch publishes for DLPack exchange (`torch.Tensor.__dlpack_c_exchange_api__`, DLPack 1.2+):
//! one C call per tensor, where `torch.from_numpy` of a numpy array made first costs a numpy
//! array, torch's argument handling and its dispatcher (about 1.1 µs a key, a tenth of a
//! one-row batch). The tensor owns the Rust buffer, as the numpy array would have: nothing is
//! copied, and torch frees it (through the deleter here) when the tensor's storage dies.
//!
//! Only CPU tensors are made, of the four dtypes the core gives (bool, int64, float32,
//! float64), C-contiguous, of one or two dimensions, and only in place of `torch.from_numpy`:
//! with a torch without the table (older than the DLPack 1.2 exchange API), or any other
//! conversion, the numpy array is made and converted as before.
//!
//! The structs below are DLPack's C ABI (`dlpack.h`, version 1), written out for this file.

use std::ffi::{c_int, c_void, CStr};
use std::ptr;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::{ffi, intern};

use crate::core::pad::{Data, Layout, Output};

use super::pad::output_to_py;
use super::tensors::torch_tensor_type;

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

/// The DLPack major version whose layout these structs follow.
const DLPACK_MAJOR: u32 = 1;

#[repr(C)]
#[derive(Clone, Copy)]
struct Version {
    major: u32,
    minor: u32,
}

#[repr(C)]
struct Device {
    device_type: i32,
    device_id: i32,
}

/// `kDLCPU`.
const CPU: i32 = 1;

#[repr(C)]
struct DataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

/// `kDLInt`, `kDLFloat` and `kDLBool`.
const INT: u8 = 0;
const FLOAT: u8 = 2;
const BOOL: u8 = 6;

#[repr(C)]
struct Tensor {
    data: *mut c_void,
    device: Device,
    ndim: i32,
    dtype: DataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct ManagedTensor {
    version: Version,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut ManagedTensor)>,
    flags: u64,
    dl_tensor: Tensor,
}

#[repr(C)]
struct ApiHeader {
    version: Version,
    prev_api: *mut ApiHeader,
}

type ToPyObject = unsafe extern "C" fn(*mut ManagedTensor, *mut *mut c_void) -> c_int;

/// `DLPackExchangeAPI`: only the function this file calls is typed.
#[repr(C)]
struct ExchangeApi {
    header: ApiHeader,
    managed_tensor_allocator: *const c_void,
    managed_tensor_from_py_object_no_sync: *const c_void,
    managed_tensor_to_py_object_no_sync: Option<ToPyObject>,
    dltensor_from_py_object_no_sync: *const c_void,
    current_work_stream: *const c_void,
}

const API_CAPSULE: &CStr = c"dlpack_exchange_api";

/// torch's `managed_tensor_to_py_object_no_sync`, found once (None: this torch has no table
/// of a version this file knows, or torch is not imported).
static TO_PY_OBJECT: PyOnceLock<Option<usize>> = PyOnceLock::new();

/// torch's function that makes a tensor from a `ManagedTensor`, or None.
fn to_py_object(py: Python<'_>) -> Option<ToPyObject> {
    let address = *TO_PY_OBJECT.get_or_init(py, || {
        let tensor_type = torch_tensor_type(py)?;
        let capsule = tensor_type
            .getattr(intern!(py, "__dlpack_c_exchange_api__"))
            .ok()?;
        // SAFETY: a capsule's pointer is read only when the object is a capsule of the
        // exchange table's name; the table lives as long as the process (the DLPack
        // protocol's rule for it), so the address can be kept.
        unsafe {
            if ffi::PyCapsule_CheckExact(capsule.as_ptr()) == 0 {
                return None;
            }
            let api = ffi::PyCapsule_GetPointer(capsule.as_ptr(), API_CAPSULE.as_ptr())
                .cast::<ExchangeApi>();
            if api.is_null() {
                ffi::PyErr_Clear();
                return None;
            }
            if (*api).header.version.major != DLPACK_MAJOR {
                return None;
            }
            (*api)
                .managed_tensor_to_py_object_no_sync
                .map(|f| f as usize)
        }
    });
    // SAFETY: the address is the table's function pointer, of this type (stored just above).
    address.map(|address| unsafe { std::mem::transmute::<usize, ToPyObject>(address) })
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

fn dims(layout: &Layout) -> Option<Vec<usize>> {
    match layout {
        Layout::Scalar { rows } => Some(vec![*rows]),
        Layout::Matrix { rows, columns } => Some(vec![*rows, *columns]),
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
        if let (Some(make), Some(dims)) = (to_py_object(py), dims(&output.layout)) {
            let dtype = |code, bits| DataType {
                code,
                bits,
                lanes: 1,
            };
            return match output.data {
                Data::Bool(v) => tensor_from_vec(py, make, v, &dims, dtype(BOOL, 8)),
                Data::I64(v) => tensor_from_vec(py, make, v, &dims, dtype(INT, 64)),
                Data::F32(v) => tensor_from_vec(py, make, v, &dims, dtype(FLOAT, 32)),
                Data::F64(v) => tensor_from_vec(py, make, v, &dims, dtype(FLOAT, 64)),
            };
        }
    }
    convert.call1((output_to_py(py, output)?,))
}
