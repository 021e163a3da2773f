//! Outputs written straight into buffers a provider gives (`collate`'s `output_buffer`): a
//! Python callable `(key, shape, dtype) -> torch.Tensor`, e.g. one that returns
//! `torch.empty(shape, dtype=..., pin_memory=True)`, so that pinned output is filled in place
//! instead of padded into Rust memory and copied.
//!
//! Each output's size is known before its buffer is asked for (the in-place padding's target,
//! or the core's `plan_outputs`), and the provider is called attached, after the rows were
//! read and before anything is written; the core then fills the buffer (detached where the
//! core pads). A buffer is taken only when torch's own description of the tensor (DLPack's
//! exchange table, which no `__torch_function__` can change) says it holds exactly that
//! output: an exact `torch.Tensor` on the CPU, of the dtype and shape asked for,
//! C-contiguous, over memory torch allocated itself (a resizable storage: not a view of a
//! numpy array, a bytes object or another library's memory, which may be read-only), and
//! overlapping no other buffer taken. Anything else raises a `ValueError` naming the key.
//!
//! The provider is Python code: rows read in place are viewed again after it has run for
//! every output of their group (`in_place::pad_group`), so no view taken before it is read.

use std::mem::MaybeUninit;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::core::pad::{DType, Data, Layout, Output, OutputBuffer, PlannedOutput};

use crate::py::convert::dlpack::{self, NotABuffer};
use crate::py::convert::torch::torch_tensor_type;

/// A buffer taken for one output.
struct Given<'py> {
    key: String,
    dtype: DType,
    dims: Vec<usize>,
    tensor: Bound<'py, PyAny>,
    data: *mut u8,
    /// Its size in values of `dtype`.
    len: usize,
}

impl Given<'_> {
    fn bytes(&self) -> std::ops::Range<usize> {
        let start = self.data as usize;
        start..start.saturating_add(self.len.saturating_mul(dtype_size(self.dtype)))
    }
}

fn dtype_size(dtype: DType) -> usize {
    match dtype {
        DType::Bool => 1,
        DType::I64 | DType::F64 => 8,
        DType::F32 => 4,
    }
}

fn dtype_name(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "bool",
        DType::I64 => "int64",
        DType::F32 => "float32",
        DType::F64 => "float64",
    }
}

/// The buffers of one `collate` call, asked of its provider.
pub struct OutputBuffers<'py> {
    provider: Bound<'py, PyAny>,
    given: Vec<Given<'py>>,
    /// The first error met where the caller can only give up (the in-place padding); raised
    /// by `raise_kept`.
    kept: Option<PyErr>,
}

impl<'py> OutputBuffers<'py> {
    /// None where torch describes no tensors (no exchange table): outputs are then the usual
    /// ones, owned by Rust buffers, and the caller copies them where it needs to.
    pub fn new(provider: &Bound<'py, PyAny>) -> Option<Self> {
        dlpack::describes_tensors(provider.py()).then(|| OutputBuffers {
            provider: provider.clone(),
            given: Vec::new(),
            kept: None,
        })
    }

    /// The tensor whose buffer holds `key`'s output.
    pub fn tensor(&self, key: &str) -> Option<&Bound<'py, PyAny>> {
        self.given.iter().find(|g| g.key == key).map(|g| &g.tensor)
    }

    /// The tensor holding `output` when it was written into a buffer given for it.
    pub fn given_tensor(&self, output: &Output) -> Option<&Bound<'py, PyAny>> {
        match output.data {
            Data::Given => self.tensor(&output.key),
            _ => None,
        }
    }

    /// Raises the error `int64` kept, if any.
    pub fn raise_kept(&mut self) -> PyResult<()> {
        self.kept.take().map_or(Ok(()), Err)
    }

    /// Asks the provider for `key`'s int64 buffer for an output laid out as `layout` (the
    /// in-place padding): its index for `int64_at`, or None (the error kept for `raise_kept`)
    /// when the provider's answer does not fit. The provider is Python code: rows read in place
    /// are viewed again after it runs (see `in_place::pad_group`).
    pub fn reserve_int64(&mut self, key: &str, layout: &Layout) -> Option<usize> {
        match self.take(key, DType::I64, layout) {
            Ok(index) => Some(index),
            Err(err) => {
                self.kept.get_or_insert(err);
                None
            }
        }
    }

    /// The int64 buffer `reserve_int64` gave `index` for; no Python code runs.
    pub fn int64_at(&mut self, index: usize) -> Option<&mut [MaybeUninit<i64>]> {
        match self.slots(index) {
            OutputBuffer::I64(slots) => Some(slots),
            _ => None,
        }
    }

    /// `output`'s values moved into a buffer for it when they are in a vector of their own
    /// (not ragged): the labels the in-place padding reads, a value per row.
    pub fn take_over(&mut self, output: &mut Output) -> PyResult<()> {
        if matches!(output.data, Data::Given) || matches!(output.layout, Layout::Ragged { .. }) {
            return Ok(());
        }
        let dtype = match &output.data {
            Data::Bool(_) => DType::Bool,
            Data::I64(_) => DType::I64,
            Data::F32(_) => DType::F32,
            Data::F64(_) => DType::F64,
            Data::Given => return Ok(()),
        };
        let index = self.take(&output.key, dtype, &output.layout)?;
        let copied = match (
            std::mem::replace(&mut output.data, Data::Given),
            self.slots(index),
        ) {
            (Data::Bool(values), OutputBuffer::Bool(slots)) => copy(&values, slots),
            (Data::I64(values), OutputBuffer::I64(slots)) => copy(&values, slots),
            (Data::F32(values), OutputBuffer::F32(slots)) => copy(&values, slots),
            (Data::F64(values), OutputBuffer::F64(slots)) => copy(&values, slots),
            _ => false,
        };
        if copied {
            Ok(())
        } else {
            Err(PyValueError::new_err(format!(
                "the output buffer given for '{}' does not match its values",
                output.key
            )))
        }
    }

    /// A buffer for each of `outputs` (none for a ragged one), for `Planned::fill`.
    pub fn for_planned(
        &mut self,
        outputs: &[PlannedOutput],
    ) -> PyResult<Vec<Option<OutputBuffer<'_>>>> {
        let mut indices = Vec::with_capacity(outputs.len());
        for (at, output) in outputs.iter().enumerate() {
            if outputs[..at].iter().any(|o| o.key == output.key) {
                return Err(PyValueError::new_err(format!(
                    "'{}' is two outputs: one buffer cannot hold both",
                    output.key
                )));
            }
            let index = match output.layout {
                Layout::Ragged { .. } => None,
                _ => Some(self.take(&output.key, output.dtype, &output.layout)?),
            };
            indices.push(index);
        }
        // SAFETY (of `slots` below): the indices are distinct (one per key) and the buffers
        // taken overlap no other (`take`), so the slices do not alias; they borrow `self`
        // mutably, which keeps every tensor alive and unchanged while they are used.
        Ok(indices
            .into_iter()
            .map(|index| index.map(|index| self.slots_unbound(index)))
            .collect())
    }

    /// `key`'s buffer's index in `given`: the one taken before for the same dtype and shape,
    /// else a new one asked of the provider and checked.
    fn take(&mut self, key: &str, dtype: DType, layout: &Layout) -> PyResult<usize> {
        let dims: Vec<usize> = match layout {
            Layout::Scalar { rows } => vec![*rows],
            Layout::Matrix { rows, columns } => vec![*rows, *columns],
            Layout::Ragged { .. } => {
                return Err(PyValueError::new_err(format!(
                    "'{key}' has rows of different lengths: no buffer can hold it"
                )))
            }
        };
        let before = self.given.iter().position(|g| g.key == key);
        if let Some(index) = before {
            let given = &self.given[index];
            if given.dtype == dtype && given.dims == dims {
                return Ok(index);
            }
        }
        let py = self.provider.py();
        let shape = PyTuple::new(py, &dims)?;
        let tensor = self
            .provider
            .call1((key, shape, dtype_name(dtype)))
            .map_err(|err| {
                let message = format!("the output buffer for '{key}' could not be made: {err}");
                let wrapped = PyValueError::new_err(message);
                wrapped.set_cause(py, Some(err));
                wrapped
            })?;
        let bad = |what: &str| {
            PyValueError::new_err(format!(
                "the output buffer given for '{key}' is {what}; it must be a tensor of {}, shape \
                 {dims:?}, on the CPU, C-contiguous, made by torch (torch.empty)",
                dtype_name(dtype)
            ))
        };
        let tensor_type = torch_tensor_type(py)
            .ok_or_else(|| PyTypeError::new_err("output buffers need torch"))?;
        if !tensor.get_type().is(tensor_type) {
            let name = tensor.get_type().name()?;
            return Err(bad(&format!("a {name}, not an exact torch.Tensor")));
        }
        let view = match dlpack::output_buffer(&tensor, dtype, &dims) {
            Ok(view) => view,
            Err(NotABuffer::Unfit(what)) => return Err(bad(&what)),
            Err(NotABuffer::NoTable) => {
                return Err(PyTypeError::new_err(
                    "output buffers need torch's DLPack exchange table",
                ))
            }
        };
        // Memory torch allocated (resizable storage), not a view of someone else's.
        let storage = tensor.call_method0(intern!(py, "untyped_storage"))?;
        if !storage
            .call_method0(intern!(py, "resizable"))?
            .is_truthy()?
        {
            return Err(bad(
                "a view of memory torch did not allocate (from numpy, a buffer or DLPack), \
                 which may be read-only",
            ));
        }
        let given = Given {
            key: key.to_owned(),
            dtype,
            dims: dims.clone(),
            tensor,
            data: view.data,
            len: view.len,
        };
        let bytes = given.bytes();
        if self.given.iter().enumerate().any(|(i, other)| {
            let theirs = other.bytes();
            Some(i) != before && bytes.start < theirs.end && theirs.start < bytes.end
        }) {
            return Err(bad("memory shared with another output's buffer"));
        }
        Ok(match before {
            Some(index) => {
                self.given[index] = given;
                index
            }
            None => {
                self.given.push(given);
                self.given.len() - 1
            }
        })
    }

    /// The buffer at `index` as slots, borrowing `self`.
    fn slots(&mut self, index: usize) -> OutputBuffer<'_> {
        self.slots_unbound(index)
    }

    /// The buffer at `index` as slots, for as long as the caller keeps `self` borrowed (see
    /// `for_planned`: no two live slices may be of the same buffer).
    fn slots_unbound<'a>(&self, index: usize) -> OutputBuffer<'a> {
        let given = &self.given[index];
        // SAFETY: `data` holds `len` values of `dtype`, aligned, in the memory of `tensor`
        // (checked by `dlpack::output_buffer`), which `self` keeps alive; nothing else writes
        // it while the slots live (the callers hold `self` mutably meanwhile, and no Python
        // code runs that could reach the tensor: it is not returned until the call ends).
        unsafe {
            match given.dtype {
                DType::Bool => OutputBuffer::Bool(slots(given.data, given.len)),
                DType::I64 => OutputBuffer::I64(slots(given.data, given.len)),
                DType::F32 => OutputBuffer::F32(slots(given.data, given.len)),
                DType::F64 => OutputBuffer::F64(slots(given.data, given.len)),
            }
        }
    }
}

/// Copies `values` into `slots` when they are as many.
fn copy<T: Copy>(values: &[T], slots: &mut [MaybeUninit<T>]) -> bool {
    if values.len() != slots.len() {
        return false;
    }
    for (slot, &value) in slots.iter_mut().zip(values) {
        slot.write(value);
    }
    true
}

/// # Safety
/// `data` must point at `len` writable, aligned `T` slots that nothing else uses for `'a`.
unsafe fn slots<'a, T>(data: *mut u8, len: usize) -> &'a mut [MaybeUninit<T>] {
    // SAFETY: the caller's guarantee.
    unsafe { std::slice::from_raw_parts_mut(data.cast::<MaybeUninit<T>>(), len) }
}
