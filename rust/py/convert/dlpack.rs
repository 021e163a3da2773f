//! torch's C function table for DLPack exchange (`torch.Tensor.__dlpack_c_exchange_api__`,
//! DLPack 1.2+): DLPack's C ABI (`dlpack.h`, version 1) written out for this crate, the table
//! found once torch is imported, and an existing tensor described in one C call, which no
//! `__torch_function__` can answer for: an integer tensor's values for the in-place reads
//! (`int_view`, see `tensor_ints`) and a given output buffer's memory (`output_buffer`, see
//! `output::output_buffers`). Making tensors through the table is `output::torch_tensors`.
//!
//! `FASTCOLLATE_DLPACK_EXCHANGE=0` turns the table off (the routes a torch without it takes).

use std::ffi::{c_int, c_void, CStr};
use std::ptr;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::{ffi, intern};

use crate::core::pad::DType;

use super::torch::torch_tensor_type;

/// The DLPack major version whose layout these structs follow.
pub(crate) const DLPACK_MAJOR: u32 = 1;

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Version {
    pub(crate) major: u32,
    pub(crate) minor: u32,
}

#[repr(C)]
pub(crate) struct Device {
    pub(crate) device_type: i32,
    pub(crate) device_id: i32,
}

/// `kDLCPU`.
pub(crate) const CPU: i32 = 1;

#[repr(C)]
pub(crate) struct DataType {
    pub(crate) code: u8,
    pub(crate) bits: u8,
    pub(crate) lanes: u16,
}

/// `kDLInt`, `kDLUInt`, `kDLFloat` and `kDLBool`.
pub(crate) const INT: u8 = 0;
pub(crate) const UINT: u8 = 1;
pub(crate) const FLOAT: u8 = 2;
pub(crate) const BOOL: u8 = 6;

#[repr(C)]
pub(crate) struct Tensor {
    pub(crate) data: *mut c_void,
    pub(crate) device: Device,
    pub(crate) ndim: i32,
    pub(crate) dtype: DataType,
    pub(crate) shape: *mut i64,
    pub(crate) strides: *mut i64,
    pub(crate) byte_offset: u64,
}

#[repr(C)]
pub(crate) struct ManagedTensor {
    pub(crate) version: Version,
    pub(crate) manager_ctx: *mut c_void,
    pub(crate) deleter: Option<unsafe extern "C" fn(*mut ManagedTensor)>,
    pub(crate) flags: u64,
    pub(crate) dl_tensor: Tensor,
}

#[repr(C)]
struct ApiHeader {
    version: Version,
    prev_api: *mut ApiHeader,
}

pub(crate) type ToPyObject = unsafe extern "C" fn(*mut ManagedTensor, *mut *mut c_void) -> c_int;
type ViewOfPyObject = unsafe extern "C" fn(*mut c_void, *mut Tensor) -> c_int;

/// `DLPackExchangeAPI`: only the functions this file calls are typed.
#[repr(C)]
struct ExchangeApi {
    header: ApiHeader,
    managed_tensor_allocator: *const c_void,
    managed_tensor_from_py_object_no_sync: *const c_void,
    managed_tensor_to_py_object_no_sync: Option<ToPyObject>,
    dltensor_from_py_object_no_sync: Option<ViewOfPyObject>,
    current_work_stream: *const c_void,
}

const API_CAPSULE: &CStr = c"dlpack_exchange_api";

/// The two functions of torch's table this file calls, as addresses.
#[derive(Clone, Copy)]
struct Functions {
    to_py_object: Option<usize>,
    view_of_py_object: Option<usize>,
}

/// torch's table, read once torch is imported (both None: this torch has no table of a
/// version this file knows).
static FUNCTIONS: PyOnceLock<Functions> = PyOnceLock::new();

fn functions(py: Python<'_>) -> Option<Functions> {
    if let Some(functions) = FUNCTIONS.get(py) {
        return Some(*functions);
    }
    // Not cached before torch is imported: the table is looked up on torch.Tensor.
    let tensor_type = torch_tensor_type(py)?;
    let none = Functions {
        to_py_object: None,
        view_of_py_object: None,
    };
    // `FASTCOLLATE_DLPACK_EXCHANGE=0` turns the table off (the routes torch without it takes:
    // numpy arrays and `torch.from_numpy`, tensors asked one attribute at a time), for tests
    // of those routes and for comparing them.
    let turned_off = std::env::var_os("FASTCOLLATE_DLPACK_EXCHANGE").is_some_and(|v| v == "0");
    let found = (|| {
        if turned_off {
            return None;
        }
        let capsule = tensor_type
            .getattr(intern!(py, "__dlpack_c_exchange_api__"))
            .ok()?;
        // SAFETY: a capsule's pointer is read only when the object is a capsule of the
        // exchange table's name; the table lives as long as the process (the DLPack
        // protocol's rule for it), so its function addresses can be kept.
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
            Some(Functions {
                to_py_object: (*api)
                    .managed_tensor_to_py_object_no_sync
                    .map(|f| f as usize),
                view_of_py_object: (*api).dltensor_from_py_object_no_sync.map(|f| f as usize),
            })
        }
    })()
    .unwrap_or(none);
    Some(*FUNCTIONS.get_or_init(py, || found))
}

/// torch's function that makes a tensor from a `ManagedTensor`, or None.
pub(crate) fn to_py_object(py: Python<'_>) -> Option<ToPyObject> {
    let address = functions(py)?.to_py_object?;
    // SAFETY: the address is the table's function pointer of this type (`functions`).
    Some(unsafe { std::mem::transmute::<usize, ToPyObject>(address) })
}

/// Whether torch's table describes tensors here (`int_view` does not return `Err`): reading
/// each tensor in place then costs less than one `torch.cat` of a batch's tensors.
pub fn describes_tensors(py: Python<'_>) -> bool {
    functions(py).is_some_and(|f| f.view_of_py_object.is_some())
}

/// The element types a tensor's integers are read as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntType {
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
}

impl IntType {
    /// The element's size in bytes (its alignment too).
    pub fn size(self) -> usize {
        match self {
            IntType::I8 | IntType::U8 => 1,
            IntType::I16 | IntType::U16 => 2,
            IntType::I32 | IntType::U32 => 4,
            IntType::I64 | IntType::U64 => 8,
        }
    }

    fn of(dtype: &DataType) -> Option<IntType> {
        if dtype.lanes != 1 {
            return None;
        }
        Some(match (dtype.code, dtype.bits) {
            (INT, 8) => IntType::I8,
            (INT, 16) => IntType::I16,
            (INT, 32) => IntType::I32,
            (INT, 64) => IntType::I64,
            (UINT, 8) => IntType::U8,
            (UINT, 16) => IntType::U16,
            (UINT, 32) => IntType::U32,
            (UINT, 64) => IntType::U64,
            _ => return None,
        })
    }
}

/// Where a CPU tensor's integers are: the first value's address, how many values there are
/// (contiguous) and their type.
pub struct IntView {
    pub data: *const u8,
    pub len: usize,
    pub int_type: IntType,
}

/// torch's description of `tensor` (an exact `torch.Tensor`: the table's functions take no
/// other type), by the table's `dltensor_from_py_object_no_sync`. `Err(())`: torch has no
/// table; `Ok(Err(error))`: torch cannot describe it (meta, sparse, quantized, ...), with the
/// Python error it set. The description's shape and strides point into the tensor's own
/// metadata: callers read them while they hold the tensor and before any Python code runs.
fn described(tensor: &Bound<'_, PyAny>) -> Result<Result<Tensor, Option<PyErr>>, ()> {
    let py = tensor.py();
    let Some(address) = functions(py).and_then(|f| f.view_of_py_object) else {
        return Err(());
    };
    // SAFETY: the address is the table's function pointer of this type (`functions`).
    let view_of = unsafe { std::mem::transmute::<usize, ViewOfPyObject>(address) };
    let mut view = Tensor {
        data: ptr::null_mut(),
        device: Device {
            device_type: 0,
            device_id: 0,
        },
        ndim: -1,
        dtype: DataType {
            code: 0,
            bits: 0,
            lanes: 0,
        },
        shape: ptr::null_mut(),
        strides: ptr::null_mut(),
        byte_offset: 0,
    };
    // SAFETY: the interpreter is attached (the function may set a Python error) and `tensor`
    // is an exact torch.Tensor (every caller checks), the type the table was found on; `view`
    // is written in place.
    if unsafe { view_of(tensor.as_ptr().cast(), &mut view) } != 0 {
        return Ok(Err(PyErr::take(py)));
    }
    Ok(Ok(view))
}

/// The values of `tensor` (an exact `torch.Tensor`: the table's functions take no other type)
/// as torch's table describes them, when they are `ndim`-dimensional (0 or 1), contiguous,
/// integers and on the CPU. `Err(())`: torch has no table (the caller asks the tensor itself);
/// `Ok(None)`: not such a tensor, or torch cannot describe it (meta, sparse, quantized, ...).
/// A pending negation (`torch._neg_view`) is not in the description: the caller checks it.
pub fn int_view(tensor: &Bound<'_, PyAny>, ndim: usize) -> Result<Option<IntView>, ()> {
    let Ok(view) = described(tensor)? else {
        return Ok(None);
    };
    // SAFETY: the description's shape and strides point into the tensor's own metadata, read
    // here before returning, while the caller holds the tensor and no Python code runs.
    unsafe {
        if view.device.device_type != CPU || view.ndim != ndim as i32 {
            return Ok(None);
        }
        let Some(int_type) = IntType::of(&view.dtype) else {
            return Ok(None);
        };
        let len = if ndim == 0 {
            1
        } else {
            let Ok(len) = usize::try_from(*view.shape) else {
                return Ok(None);
            };
            // Contiguous: one element apart (a null strides pointer means compact).
            if len > 1 && !view.strides.is_null() && *view.strides != 1 {
                return Ok(None);
            }
            len
        };
        let Ok(offset) = usize::try_from(view.byte_offset) else {
            return Ok(None);
        };
        let data = view.data.cast::<u8>().cast_const().wrapping_add(offset);
        if len == 0 {
            // No value is read: any aligned, non-null address will do.
            return Ok(Some(IntView {
                data: int_type.size() as *const u8,
                len,
                int_type,
            }));
        }
        if view.data.is_null() || (data as usize) % int_type.size() != 0 {
            return Ok(None);
        }
        Ok(Some(IntView {
            data,
            len,
            int_type,
        }))
    }
}

/// `kDLCUDAHost`: page-locked host memory, which a pinned CPU tensor may be described as.
const CUDA_HOST: i32 = 3;

/// Where a writable buffer given for an output lies, as torch's table describes the tensor.
pub struct BufferView {
    pub data: *mut u8,
    /// Its values, C-contiguous from `data`.
    pub len: usize,
}

/// Why a tensor cannot take an output (see `output_buffer`).
pub enum NotABuffer {
    /// torch has no exchange table.
    NoTable,
    /// Not a buffer of that output: what it is instead.
    Unfit(String),
}

fn data_type(dtype: DType) -> (u8, u8) {
    match dtype {
        DType::Bool => (BOOL, 8),
        DType::I64 => (INT, 64),
        DType::F32 => (FLOAT, 32),
        DType::F64 => (FLOAT, 64),
    }
}

/// The memory of `tensor` (an exact `torch.Tensor`) when it can hold an output of `dtype`
/// and shape `dims` (one or two dimensions) as it is: on the CPU (pinned or not), of that
/// dtype and shape, C-contiguous and aligned. Read from torch's own description of the tensor
/// (one C call), which no Python-level override can change.
pub fn output_buffer(
    tensor: &Bound<'_, PyAny>,
    dtype: DType,
    dims: &[usize],
) -> Result<BufferView, NotABuffer> {
    let unfit = |what: String| Err(NotABuffer::Unfit(what));
    let view = match described(tensor) {
        Err(()) => return Err(NotABuffer::NoTable),
        Ok(Err(err)) => {
            // The first line: torch appends a C++ backtrace to some of its messages.
            let err = err.map_or_else(String::new, |err| {
                let message = err.to_string();
                format!(": {}", message.lines().next().unwrap_or_default())
            });
            return unfit(format!("a tensor torch cannot describe{err}"));
        }
        Ok(Ok(view)) => view,
    };
    // SAFETY: the description's shape and strides point into the tensor's own metadata, read
    // here before anything else runs, while the caller holds the tensor.
    unsafe {
        if view.device.device_type != CPU && view.device.device_type != CUDA_HOST {
            return unfit(format!(
                "a tensor off the CPU (DLPack device type {})",
                view.device.device_type
            ));
        }
        let (code, bits) = data_type(dtype);
        if (view.dtype.code, view.dtype.bits, view.dtype.lanes) != (code, bits, 1) {
            return unfit(format!(
                "a tensor of another dtype (DLPack code {}, {} bits)",
                view.dtype.code, view.dtype.bits
            ));
        }
        let ndim = usize::try_from(view.ndim).unwrap_or(usize::MAX);
        let shape: &[i64] = if ndim == 0 || view.shape.is_null() {
            &[]
        } else {
            std::slice::from_raw_parts(view.shape, ndim)
        };
        if ndim != dims.len()
            || shape
                .iter()
                .zip(dims)
                .any(|(&s, &d)| usize::try_from(s) != Ok(d))
        {
            return unfit(format!("a tensor of shape {shape:?}"));
        }
        // C order: each dimension's stride the product of the later ones (a dimension of one
        // value, or an empty tensor, has no stride that matters; null strides mean compact).
        if !view.strides.is_null() && !dims.contains(&0) {
            let strides = std::slice::from_raw_parts(view.strides, ndim);
            let mut expected: i64 = 1;
            for (&stride, &dim) in strides.iter().zip(dims).rev() {
                if dim > 1 && stride != expected {
                    return unfit(format!("a non-contiguous tensor (strides {strides:?})"));
                }
                expected = expected.saturating_mul(i64::try_from(dim).unwrap_or(i64::MAX));
            }
        }
        let len = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        let (Some(len), Ok(offset)) = (len, usize::try_from(view.byte_offset)) else {
            return unfit("a tensor past the address space".into());
        };
        let item = usize::from(bits / 8);
        let data = view.data.cast::<u8>().wrapping_add(offset);
        if len == 0 {
            // Nothing is written: any aligned, non-null address will do.
            return Ok(BufferView {
                data: item as *mut u8,
                len,
            });
        }
        if view.data.is_null() || (data as usize) % item != 0 {
            return unfit("a tensor without aligned data".into());
        }
        Ok(BufferView { data, len })
    }
}
