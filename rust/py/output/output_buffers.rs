//! Outputs written into buffers a provider gives (`collate`'s and `collate_arrow`'s
//! `output_buffer`): a Python callable `(key, shape, dtype) -> torch.Tensor`, e.g. one that
//! returns `torch.empty(shape, dtype=..., pin_memory=True)`, so that the batch comes back in
//! pinned memory without torch's second allocation and copy.
//!
//! The outputs reach this module as every other output does: padded into Rust memory, every row
//! read and every size known. `fill` then runs in three phases, and no Python code runs once the
//! third has begun:
//! 1. Python: the provider is called for every output (ragged ones excepted), each answer an
//!    exact `torch.Tensor`, and each tensor's storage checked to be memory torch allocated
//!    (`torch::allocated_by_torch`: `TensorBase`'s and `StorageBase`'s own C methods, called
//!    with torch functions off, so no patched method or mode answers), and described by torch's
//!    DLPack exchange table (`dlpack::output_buffer`: on the CPU, of the dtype and shape asked
//!    for, C-contiguous, aligned).
//! 2. Pointers: each tensor described again (one C call each, no Python), its data where phase
//!    1 found it and overlapping no other buffer: a tensor moved or swapped meanwhile (by the
//!    provider's next call, or a `__del__` run by an allocation) is refused, not written.
//! 3. Writes: each output's values copied into its buffer, attached (the tensors are memory
//!    Python can move: the interpreter is not released over them).
//!
//! Anything that does not fit raises a `ValueError` naming the key before a value is written.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::core::pad::{DType, Data, Layout, Output};

use crate::py::convert::dlpack::{self, BufferView, NotABuffer};
use crate::py::convert::torch::{self as torch_py, torch_tensor_type};

fn dtype_of(data: &Data) -> DType {
    match data {
        Data::Bool(_) => DType::Bool,
        Data::I64(_) => DType::I64,
        Data::F32(_) => DType::F32,
        Data::F64(_) => DType::F64,
    }
}

/// The shape a buffer for an output of `layout` has; None for a ragged one (no buffer).
fn dims_of(layout: &Layout) -> Option<Vec<usize>> {
    match layout {
        Layout::Scalar { rows } => Some(vec![*rows]),
        Layout::Matrix { rows, columns } => Some(vec![*rows, *columns]),
        Layout::Ragged { .. } => None,
    }
}

/// A buffer asked for one output, as phase 1 found it.
struct Asked<'py> {
    /// Its index in the outputs.
    at: usize,
    dtype: DType,
    dims: Vec<usize>,
    tensor: Bound<'py, PyAny>,
    /// The data address phase 1's description gave.
    data: usize,
}

/// The output-buffer provider of one call.
pub struct OutputBuffers<'py> {
    provider: Bound<'py, PyAny>,
}

impl<'py> OutputBuffers<'py> {
    /// None where torch describes no tensors (no exchange table): outputs are then the usual
    /// ones, owned by Rust buffers, and the caller copies them where it needs to.
    pub fn new(provider: &Bound<'py, PyAny>) -> Option<Self> {
        dlpack::describes_tensors(provider.py()).then(|| OutputBuffers {
            provider: provider.clone(),
        })
    }

    /// Writes each of `outputs` (but ragged ones) into a buffer asked of the provider, in the
    /// three phases of the module's note: the tensor holding each output, None for a ragged
    /// one (handed out the usual way). Nothing is written unless every buffer fits.
    pub fn fill(&self, outputs: &[Output]) -> PyResult<Vec<Option<Bound<'py, PyAny>>>> {
        // Phase 1: every Python-level answer.
        let mut asked: Vec<Asked<'py>> = Vec::with_capacity(outputs.len());
        for (at, output) in outputs.iter().enumerate() {
            let Some(dims) = dims_of(&output.layout) else {
                continue;
            };
            let dtype = dtype_of(&output.data);
            if outputs[..at].iter().any(|o| o.key == output.key) {
                return Err(PyValueError::new_err(format!(
                    "'{}' is two outputs: one buffer cannot hold both",
                    output.key
                )));
            }
            let tensor = self.ask(&output.key, dtype, &dims)?;
            asked.push(Asked {
                at,
                dtype,
                dims,
                tensor,
                data: 0,
            });
        }
        for buffer in &mut asked {
            let key = &outputs[buffer.at].key;
            if !torch_py::allocated_by_torch(&buffer.tensor)? {
                return Err(unfit(
                    key,
                    buffer.dtype,
                    &buffer.dims,
                    "a view of memory torch did not allocate (from numpy, a buffer or DLPack), \
                     which may be read-only",
                ));
            }
            buffer.data = describe(key, buffer)?.data as usize;
        }
        // Phase 2: the pointers, no Python code run from here to the last write.
        let mut views: Vec<BufferView> = Vec::with_capacity(asked.len());
        for buffer in &asked {
            let key = &outputs[buffer.at].key;
            let view = describe(key, buffer)?;
            if view.data as usize != buffer.data {
                return Err(unfit(
                    key,
                    buffer.dtype,
                    &buffer.dims,
                    "a tensor whose memory moved while the buffers were checked",
                ));
            }
            let bytes = byte_range(&view, buffer.dtype);
            let overlaps = views.iter().zip(&asked).any(|(other, theirs)| {
                let theirs = byte_range(other, theirs.dtype);
                bytes.start < theirs.end && theirs.start < bytes.end
            });
            if overlaps {
                return Err(unfit(
                    key,
                    buffer.dtype,
                    &buffer.dims,
                    "memory shared with another output's buffer",
                ));
            }
            views.push(view);
        }
        // Phase 3: the writes.
        for (buffer, view) in asked.iter().zip(&views) {
            let output = &outputs[buffer.at];
            // SAFETY: `view` is torch's description of `buffer.tensor`, taken above with no
            // Python code run since and none run until the last write: the tensor (held by
            // `asked`) keeps that memory, `len` values of the dtype checked, C-contiguous,
            // aligned, writable (storage torch allocated), and overlapping no other buffer.
            let written = unsafe { write(&output.data, view) };
            if !written {
                return Err(PyValueError::new_err(format!(
                    "the output buffer given for '{}' does not match its values",
                    output.key
                )));
            }
        }
        let mut tensors: Vec<Option<Bound<'py, PyAny>>> = vec![None; outputs.len()];
        for buffer in asked {
            tensors[buffer.at] = Some(buffer.tensor);
        }
        Ok(tensors)
    }

    /// The provider's tensor for `key`: an exact `torch.Tensor` (its memory not yet checked).
    fn ask(&self, key: &str, dtype: DType, dims: &[usize]) -> PyResult<Bound<'py, PyAny>> {
        let py = self.provider.py();
        let shape = PyTuple::new(py, dims)?;
        let tensor = self
            .provider
            .call1((key, shape, dtype.name()))
            .map_err(|err| {
                let message = format!("the output buffer for '{key}' could not be made: {err}");
                let wrapped = PyValueError::new_err(message);
                wrapped.set_cause(py, Some(err));
                wrapped
            })?;
        let tensor_type = torch_tensor_type(py)
            .ok_or_else(|| PyTypeError::new_err("output buffers need torch"))?;
        if !tensor.get_type().is(tensor_type) {
            let name = tensor.get_type().name()?;
            return Err(unfit(
                key,
                dtype,
                dims,
                &format!("a {name}, not an exact torch.Tensor"),
            ));
        }
        Ok(tensor)
    }
}

fn unfit(key: &str, dtype: DType, dims: &[usize], what: &str) -> PyErr {
    PyValueError::new_err(format!(
        "the output buffer given for '{key}' is {what}; it must be a tensor of {}, shape \
         {dims:?}, on the CPU, C-contiguous, made by torch (torch.empty)",
        dtype.name()
    ))
}

/// torch's description of `buffer`'s tensor as a buffer of its output (one C call).
fn describe(key: &str, buffer: &Asked<'_>) -> PyResult<BufferView> {
    match dlpack::output_buffer(&buffer.tensor, buffer.dtype, &buffer.dims) {
        Ok(view) => Ok(view),
        Err(NotABuffer::Unfit(what)) => Err(unfit(key, buffer.dtype, &buffer.dims, &what)),
        Err(NotABuffer::NoTable) => Err(PyTypeError::new_err(
            "output buffers need torch's DLPack exchange table",
        )),
    }
}

fn byte_range(view: &BufferView, dtype: DType) -> std::ops::Range<usize> {
    let start = view.data as usize;
    start..start.saturating_add(view.len.saturating_mul(dtype.item_size()))
}

/// Copies `data` into `view` when they are as many values of one dtype; false otherwise.
///
/// # Safety
/// `view` must describe `len` writable, aligned values of `data`'s dtype that nothing else
/// reads or writes meanwhile.
unsafe fn write(data: &Data, view: &BufferView) -> bool {
    unsafe fn copy<T: Copy>(values: &[T], view: &BufferView) -> bool {
        if values.len() != view.len {
            return false;
        }
        if !values.is_empty() {
            // SAFETY: the caller's guarantee; `values` is Rust memory, apart from the buffer.
            unsafe {
                std::ptr::copy_nonoverlapping(values.as_ptr(), view.data.cast::<T>(), view.len)
            };
        }
        true
    }
    // SAFETY: the caller's guarantee, for the dtype `data` holds (checked by the description).
    unsafe {
        match data {
            Data::Bool(values) => copy(values, view),
            Data::I64(values) => copy(values, view),
            Data::F32(values) => copy(values, view),
            Data::F64(values) => copy(values, view),
        }
    }
}

/// The one way a call's outputs leave it, in order: with `buffers`, each written into the
/// tensor the provider gives for it (`OutputBuffers::fill`, every buffer checked before any is
/// written), that tensor handed out; every other output (no provider, or a ragged one) handed
/// to `convert` (a numpy array or tensor over its own Rust buffer).
pub fn hand_out<'py>(
    buffers: Option<&OutputBuffers<'py>>,
    outputs: Vec<Output>,
    mut convert: impl FnMut(Output) -> PyResult<Bound<'py, PyAny>>,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let given = match buffers {
        Some(buffers) => buffers.fill(&outputs)?,
        None => Vec::new(),
    };
    let mut given = given.into_iter();
    outputs
        .into_iter()
        .map(|output| match given.next().flatten() {
            Some(tensor) => Ok(tensor),
            None => convert(output),
        })
        .collect()
}
