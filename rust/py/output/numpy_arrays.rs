//! The core's outputs handed to numpy without a copy: each output's Vec becomes the buffer of
//! a numpy array whose base is a capsule that frees it (`owned_array`); ragged outputs become
//! lists of lists; the samplers' index batches become (indices, offsets) arrays.

use std::ffi::{c_int, c_void, CStr};
use std::ptr;

use numpy::npyffi::{self, npy_intp, PY_ARRAY_API};
use numpy::{Element, PyArray1, PyArrayDescrMethods};
use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::core::batches::Batches;
use crate::core::pad::{Data, Layout, Output};

fn ragged_list<'py, T>(
    py: Python<'py>,
    values: &[T],
    offsets: &[usize],
) -> PyResult<Bound<'py, PyAny>>
where
    T: Copy + for<'a> IntoPyObject<'a>,
{
    let rows = offsets
        .windows(2)
        .map(|w| PyList::new(py, values[w[0]..w[1]].iter().copied()))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(PyList::new(py, rows)?.into_any())
}

/// The capsule's name, which its destructor checks.
const BUFFER: &CStr = c"fastcollate.buffer";

/// Frees the buffer of a `Vec<T>` a capsule made by `owned_array` holds: its pointer is the
/// Vec's, its context the Vec's capacity. Called once, by Python, when the capsule dies.
unsafe extern "C" fn free_buffer<T>(capsule: *mut ffi::PyObject) {
    // SAFETY: only capsules made by `owned_array::<T>` have this destructor, named `BUFFER`,
    // their pointer and capacity taken from a Vec<T> that was forgotten; rebuilding it here is
    // the only place that buffer is freed. The length 0 drops no element (T is Copy).
    unsafe {
        let data = ffi::PyCapsule_GetPointer(capsule, BUFFER.as_ptr()).cast::<T>();
        let capacity = ffi::PyCapsule_GetContext(capsule) as usize;
        if !data.is_null() {
            drop(Vec::from_raw_parts(data, 0, capacity));
        } else {
            ffi::PyErr_Clear();
        }
    }
}

/// A numpy array of `dims` (one to three) over `values`' buffer, without a copy: a capsule
/// that frees the Vec when numpy lets go of it is the array's base. Strides and flags are those
/// rust-numpy gives (C order; writeable; an empty array has zero strides, as ndarray's).
pub(crate) fn owned_array<'py, T>(
    py: Python<'py>,
    mut values: Vec<T>,
    dims: &[usize],
) -> PyResult<Bound<'py, PyAny>>
where
    T: Element + Copy,
{
    let item = size_of::<T>() as npy_intp;
    let mut shape: [npy_intp; 3] = [0; 3];
    let mut strides: [npy_intp; 3] = [0; 3];
    if dims.is_empty() || dims.len() > 3 {
        return Err(PyValueError::new_err(
            "an output has one to three dimensions",
        ));
    }
    for (i, &d) in dims.iter().enumerate() {
        shape[i] = npy_intp::try_from(d)
            .map_err(|_| PyValueError::new_err("an output dimension is past numpy's limit"))?;
    }
    if dims.len() == 1 {
        strides[0] = item;
    } else if !dims.contains(&0) {
        // At most the Vec's size in bytes, which fits an isize.
        let mut stride = item;
        for i in (0..dims.len()).rev() {
            strides[i] = stride;
            stride *= shape[i];
        }
    }
    let data = values.as_mut_ptr();
    let capacity = values.capacity();
    // SAFETY: the capsule takes the buffer: from here it frees it (`free_buffer`) and nothing
    // else does; if it cannot be made, the Vec is rebuilt and dropped here instead.
    let capsule = unsafe {
        std::mem::forget(values);
        let capsule = ffi::PyCapsule_New(data.cast(), BUFFER.as_ptr(), Some(free_buffer::<T>));
        if capsule.is_null() {
            drop(Vec::from_raw_parts(data, 0, capacity));
            return Err(PyErr::fetch(py));
        }
        // Owned from here: dropping it runs the destructor.
        let capsule = Bound::from_owned_ptr(py, capsule);
        if ffi::PyCapsule_SetContext(capsule.as_ptr(), capacity as *mut c_void) != 0 {
            return Err(PyErr::fetch(py));
        }
        capsule
    };
    // SAFETY: the buffer is the Vec's: `dims` within its length (checked by the callers),
    // alive as long as the capsule.
    unsafe {
        let ndim = dims.len();
        array_over(
            py,
            T::get_dtype(py),
            &mut shape[..ndim],
            &mut strides[..ndim],
            data.cast(),
            capsule,
        )
    }
}

/// A numpy array of `shape` and `strides` (as many as its dimensions) over `data`, with `base` as its
/// base object (which keeps `data` alive and frees it when numpy lets go).
///
/// # Safety
/// `data` with that shape and those strides lies in memory `base` keeps alive and writable.
unsafe fn array_over<'py>(
    py: Python<'py>,
    dtype: Bound<'py, numpy::PyArrayDescr>,
    shape: &mut [npy_intp],
    strides: &mut [npy_intp],
    data: *mut c_void,
    base: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: the caller vouches for `data`; the array holds `base` as its base, which keeps
    // the memory alive as long as the array (and any view of it) lives. NewFromDescr steals
    // the descriptor reference.
    unsafe {
        let array = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            npyffi::get_type_object(py, npyffi::NpyTypes::PyArray_Type),
            dtype.into_dtype_ptr(),
            shape.len() as c_int,
            shape.as_mut_ptr(),
            strides.as_mut_ptr(),
            data,
            npyffi::NPY_ARRAY_WRITEABLE,
            ptr::null_mut(),
        );
        if array.is_null() {
            return Err(PyErr::fetch(py));
        }
        let array = Bound::from_owned_ptr(py, array);
        // SetBaseObject steals the base's reference, also when it fails.
        if PY_ARRAY_API.PyArray_SetBaseObject(py, array.as_ptr().cast(), base.into_ptr()) != 0 {
            return Err(PyErr::fetch(py));
        }
        Ok(array)
    }
}

/// The capsule's name for a lease `leased_bytes` keeps.
const LEASE: &CStr = c"fastcollate.lease";

/// Drops the `Box<L>` a capsule made by `leased_bytes::<L>` holds. Called once, by Python,
/// when the capsule dies.
unsafe extern "C" fn drop_lease<L>(capsule: *mut ffi::PyObject) {
    // SAFETY: only capsules made by `leased_bytes::<L>` have this destructor, named `LEASE`,
    // their pointer a leaked Box<L>; rebuilding it here is the only place it is dropped.
    unsafe {
        let lease = ffi::PyCapsule_GetPointer(capsule, LEASE.as_ptr()).cast::<L>();
        if !lease.is_null() {
            drop(Box::from_raw(lease));
        } else {
            ffi::PyErr_Clear();
        }
    }
}

/// A C-ordered numpy array of `shape` over the `len` bytes at `data`, without a copy: of
/// numpy's type number `typenum`, or uint8 bytes (one dimension, `len` long) when None. Its
/// base is a capsule owning `lease`, dropped when numpy lets go of the array (and every view
/// of it). A `ValueError` when the shape's bytes are not `len`.
///
/// # Safety
/// The `len` bytes at `data` stay mapped, writable and not written by anyone else while
/// `lease` lives.
pub(crate) unsafe fn leased_array<'py, L: Send + 'static>(
    py: Python<'py>,
    data: *mut u8,
    len: usize,
    typenum: Option<c_int>,
    shape: &[usize],
    lease: L,
) -> PyResult<Bound<'py, PyAny>> {
    let beyond = || PyValueError::new_err("a view is past numpy's limit");
    let (dtype, dims) = match typenum {
        None => (u8::get_dtype(py), vec![len]),
        Some(number) => {
            // SAFETY: DescrFromType returns a new reference, or NULL with an exception set.
            let descr = unsafe { PY_ARRAY_API.PyArray_DescrFromType(py, number) };
            if descr.is_null() {
                return Err(PyErr::fetch(py));
            }
            // SAFETY: a new reference to an array descriptor, owned from here.
            let descr = unsafe { Bound::from_owned_ptr(py, descr.cast()) };
            (descr.cast_into::<numpy::PyArrayDescr>()?, shape.to_vec())
        }
    };
    let item = dtype.itemsize();
    if item == 0 || (data as usize) % item != 0 {
        return Err(PyValueError::new_err(format!(
            "a view at an address not aligned for its {item}-byte items"
        )));
    }
    let bytes = dims
        .iter()
        .try_fold(item, |total, &d| total.checked_mul(d))
        .ok_or_else(beyond)?;
    if bytes != len {
        return Err(PyValueError::new_err(format!(
            "a view of {len} bytes cannot be shaped {shape:?} of {item}-byte items"
        )));
    }
    let mut sizes = dims
        .iter()
        .map(|&d| npy_intp::try_from(d).map_err(|_| beyond()))
        .collect::<PyResult<Vec<_>>>()?;
    let mut strides = vec![0 as npy_intp; sizes.len()];
    let mut stride = item as npy_intp; // at most `len`, which fits (checked above)
    for i in (0..sizes.len()).rev() {
        strides[i] = stride;
        stride = stride.saturating_mul(sizes[i]);
    }
    let lease = Box::into_raw(Box::new(lease));
    // SAFETY: the capsule takes the box: from here it drops it (`drop_lease`) and nothing
    // else does; if it cannot be made, the box is dropped here instead.
    let capsule = unsafe {
        let capsule = ffi::PyCapsule_New(lease.cast(), LEASE.as_ptr(), Some(drop_lease::<L>));
        if capsule.is_null() {
            drop(Box::from_raw(lease));
            return Err(PyErr::fetch(py));
        }
        Bound::from_owned_ptr(py, capsule)
    };
    // SAFETY: the caller vouches for the bytes while the lease (now the capsule's) lives; the
    // shape and strides cover exactly `len` bytes (checked above).
    unsafe { array_over(py, dtype, &mut sizes, &mut strides, data.cast(), capsule) }
}

fn array<'py, T>(py: Python<'py>, values: Vec<T>, layout: &Layout) -> PyResult<Bound<'py, PyAny>>
where
    T: Element + Copy + for<'a> IntoPyObject<'a>,
{
    // The array owns the Rust buffer: nothing is copied.
    match layout {
        Layout::Scalar { .. } => {
            let rows = values.len();
            owned_array(py, values, &[rows])
        }
        Layout::Matrix { rows, columns } => {
            if rows.checked_mul(*columns) != Some(values.len()) {
                return Err(PyValueError::new_err(format!(
                    "an output of {} values cannot be shaped {rows} x {columns}",
                    values.len()
                )));
            }
            owned_array(py, values, &[*rows, *columns])
        }
        Layout::Ragged { offsets } => ragged_list(py, &values, offsets),
    }
}

pub fn output_to_py<'py>(py: Python<'py>, output: Output) -> PyResult<Bound<'py, PyAny>> {
    match output.data {
        Data::Bool(v) => array(py, v, &output.layout),
        Data::I64(v) => array(py, v, &output.layout),
        Data::F32(v) => array(py, v, &output.layout),
        Data::F64(v) => array(py, v, &output.layout),
    }
}

/// An int64 numpy array owning a Rust Vec's buffer (`vector`).
pub type I64Array<'py> = Bound<'py, PyArray1<i64>>;

/// Index batches (`core::batches`) as the samplers hand them to Python: (indices, offsets).
pub fn batch_arrays(py: Python<'_>, batches: Batches) -> PyResult<(I64Array<'_>, I64Array<'_>)> {
    Ok((vector(py, batches.indices)?, vector(py, batches.offsets)?))
}

/// `values` as a 1-d numpy array that owns their buffer (`owned_array`: no copy). Every
/// binding's 1-d arrays leave through here.
pub fn vector<T>(py: Python<'_>, values: Vec<T>) -> PyResult<Bound<'_, PyArray1<T>>>
where
    T: Element + Copy,
{
    let length = values.len();
    Ok(owned_array(py, values, &[length])?.cast_into::<PyArray1<T>>()?)
}

/// `values` (row-major) as a `rows × columns` numpy array that owns their buffer
/// (`owned_array`: no copy); a `ValueError` when their number is not `rows × columns`. Every
/// binding's matrices leave through here.
pub fn matrix<T>(
    py: Python<'_>,
    rows: usize,
    columns: usize,
    values: Vec<T>,
) -> PyResult<Bound<'_, PyAny>>
where
    T: Element + Copy + for<'a> IntoPyObject<'a>,
{
    array(py, values, &Layout::Matrix { rows, columns })
}
