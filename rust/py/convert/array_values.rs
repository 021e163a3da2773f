//! A numpy array's values as a Rust slice, borrowed where the array is contiguous and copied
//! once where it is strided: any element type (`with_values`; `OwnedArray1` copies the typed
//! int64/uint8 arrays the sampling and packing bindings take), and integer arrays of any
//! width read as int64 (`IntElement`, `IntValuesVisitor`, `with_int_values`, `append_ints`).

use numpy::{PyArray1, PyArrayDescrMethods, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::core::pad::Slots;

/// A 1-d numpy array of `T` copied into Rust memory as it is taken (a binding's argument),
/// attached to the interpreter: what a binding reads with the interpreter released is never
/// the array's own memory, which Python can move or free meanwhile (`ndarray.resize(...,
/// refcheck=False)` from another thread). No numpy borrow is taken either: its release would
/// have to find the array where it was.
pub struct OwnedArray1<T>(pub Vec<T>);

impl<'a, 'py, T: numpy::Element + Copy> FromPyObject<'a, 'py> for OwnedArray1<T> {
    type Error = PyErr;

    fn extract(obj: pyo3::Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let array = obj.cast::<PyArray1<T>>().map_err(PyErr::from)?;
        Ok(OwnedArray1(owned_values(&array)?))
    }
}

/// The values of `array`, copied. A strided or unaligned array is first copied by numpy (its
/// `copy()`, a fresh C-contiguous array no one else holds).
pub fn owned_values<T: numpy::Element + Copy>(array: &Bound<'_, PyArray1<T>>) -> PyResult<Vec<T>> {
    let fresh;
    let array = if array.is_c_contiguous() && array.is_aligned() {
        array
    } else {
        fresh = array.call_method0("copy")?.cast_into::<PyArray1<T>>()?;
        if !(fresh.is_c_contiguous() && fresh.is_aligned()) {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "an array that cannot be read as contiguous values",
            ));
        }
        &fresh
    };
    // SAFETY: checked C-contiguous and aligned, of `T` (the cast); the slice is copied at once,
    // attached, with no Python code run in between, so nothing can move the array meanwhile.
    let values = unsafe { array.as_slice() }
        .map(<[T]>::to_vec)
        .map_err(|_| pyo3::exceptions::PyValueError::new_err("a non-contiguous array"))?;
    Ok(values)
}

/// Hands `read` the values of a 1-d array of `T` (copied out first when it is strided).
/// `None`: not an aligned, native-order array of `T`; the caller goes through `tolist()`.
pub(crate) fn with_values<T: numpy::Element + Copy, R>(
    array: &Bound<'_, PyUntypedArray>,
    read: impl FnOnce(&[T]) -> R,
) -> Option<R> {
    let typed = array.cast::<PyArray1<T>>().ok()?;
    if !typed.is_aligned() {
        return None;
    }
    #[cfg(not(Py_GIL_DISABLED))]
    // SAFETY: the view lives only while `read` copies the values into a column, attached to the
    // interpreter (a build with a GIL) and running no Python code, so nothing writes the array
    // meanwhile. This skips numpy's borrow tracking (a process-wide hash map looked up per
    // array), which guards against `&mut` views held by Rust code; this crate takes none.
    unsafe {
        match typed.as_slice() {
            Ok(values) => Some(read(values)),
            Err(_) => {
                let owned: Vec<T> = typed.as_array().iter().copied().collect();
                Some(read(&owned))
            }
        }
    }
    #[cfg(Py_GIL_DISABLED)]
    {
        let readonly = typed.try_readonly().ok()?;
        match readonly.as_slice() {
            Ok(values) => Some(read(values)),
            Err(_) => {
                let owned: Vec<T> = readonly.as_array().iter().copied().collect();
                Some(read(&owned))
            }
        }
    }
}

/// A numpy integer element type, read as int64.
pub trait IntElement: numpy::Element + Copy {
    /// Whether int64 holds every value of the type (all but uint64).
    const WIDENS: bool;
    /// The value as int64, wrapping past `i64::MAX` (only uint64 can be).
    fn wrapping_i64(self) -> i64;
    /// The value as int64; `None` past `i64::MAX`.
    fn to_i64(self) -> Option<i64>;
    /// Appends `values` to `out` as int64 (wrapping: the caller checked the range), in one
    /// loop over the slice; int64 values are copied as they are.
    #[inline(always)]
    fn append_all(values: &[Self], out: &mut Slots<'_, i64>) {
        out.extend_mapped(values, Self::wrapping_i64);
    }
}

impl IntElement for i64 {
    const WIDENS: bool = true;
    #[inline(always)]
    fn wrapping_i64(self) -> i64 {
        self
    }
    #[inline(always)]
    fn to_i64(self) -> Option<i64> {
        Some(self)
    }
    #[inline(always)]
    fn append_all(values: &[Self], out: &mut Slots<'_, i64>) {
        out.extend_from_slice(values);
    }
}

macro_rules! int_elements_widen {
    ($($t:ty),*) => {$(
        impl IntElement for $t {
            const WIDENS: bool = true;
            #[inline(always)]
            fn wrapping_i64(self) -> i64 {
                i64::from(self)
            }
            #[inline(always)]
            fn to_i64(self) -> Option<i64> {
                Some(i64::from(self))
            }
            #[inline(always)]
            fn append_all(values: &[Self], out: &mut Slots<'_, i64>) {
                out.extend_widened(values);
            }
        }
    )*};
}
int_elements_widen!(i8, i16, i32, u8, u16, u32);

impl IntElement for u64 {
    const WIDENS: bool = false;
    #[inline(always)]
    fn wrapping_i64(self) -> i64 {
        self as i64
    }
    #[inline(always)]
    fn to_i64(self) -> Option<i64> {
        i64::try_from(self).ok()
    }
}

/// Something done with the values of an integer array, whatever their element type.
pub trait IntValuesVisitor {
    type Output;
    fn visit<T: IntElement>(self, values: &[T]) -> Self::Output;
}

/// Hands `visitor` the values of a 1-d integer array (see `with_values`). `None`: not an
/// aligned, native-order array of an integer type (bools and floats included).
///
/// Asked once per row of a batch: the element type is told from the dtype's own fields (a
/// built-in integer type in native byte order, which is what the typed cast in `with_values`
/// accepts for these widths), and a contiguous array's values are handed over where they lie
/// (`contiguous_values`) without that cast's dtype lookup and comparison through numpy's API.
pub fn with_int_values<V: IntValuesVisitor>(
    array: &Bound<'_, PyUntypedArray>,
    visitor: V,
) -> Option<V::Output> {
    let dtype = array.dtype();
    if !BUILTIN_INTS.contains(&dtype.num()) || dtype.is_native_byteorder() == Some(false) {
        return None;
    }
    match (dtype.kind(), dtype.itemsize()) {
        (b'i', 1) => with_ints::<i8, _>(array, visitor),
        (b'i', 2) => with_ints::<i16, _>(array, visitor),
        (b'i', 4) => with_ints::<i32, _>(array, visitor),
        (b'i', 8) => with_ints::<i64, _>(array, visitor),
        (b'u', 1) => with_ints::<u8, _>(array, visitor),
        (b'u', 2) => with_ints::<u16, _>(array, visitor),
        (b'u', 4) => with_ints::<u32, _>(array, visitor),
        (b'u', 8) => with_ints::<u64, _>(array, visitor),
        _ => None,
    }
}

/// numpy's built-in integer type numbers (`NPY_BYTE` to `NPY_ULONGLONG`): a user-defined
/// dtype of the same kind and width is not read as one.
const BUILTIN_INTS: std::ops::RangeInclusive<std::ffi::c_int> = 1..=10;

fn with_ints<T: IntElement, V: IntValuesVisitor>(
    array: &Bound<'_, PyUntypedArray>,
    visitor: V,
) -> Option<V::Output> {
    #[cfg(not(Py_GIL_DISABLED))]
    if let Some(values) = contiguous_values::<T>(array) {
        return Some(visitor.visit(values));
    }
    with_values::<T, _>(array, |v| visitor.visit(v))
}

/// The values of a 1-d, aligned, C-contiguous array whose elements the caller found to be
/// `T` (a built-in integer type of `T`'s kind and width, native byte order); None for any
/// other array (`with_values` then reads it, strided ones included).
#[cfg(not(Py_GIL_DISABLED))]
fn contiguous_values<'a, T: IntElement>(array: &'a Bound<'_, PyUntypedArray>) -> Option<&'a [T]> {
    if array.ndim() != 1 || !array.is_aligned() || !array.is_c_contiguous() {
        return None;
    }
    let len = array.len();
    if len == 0 {
        return Some(&[]);
    }
    // SAFETY: a 1-d array's data pointer, read from the live array object.
    let data = unsafe { (*array.as_array_ptr()).data }.cast::<T>();
    if data.is_null() {
        return None;
    }
    // SAFETY: `len` aligned values of `T` lie contiguous from `data` (checked above: one
    // dimension, C-contiguous, aligned, and the dtype is `T`'s). As in `with_values`, the slice
    // is only read while the caller's visitor copies the values, attached to the interpreter
    // (a build with a GIL) and running no Python code, so nothing moves or frees the array's
    // memory meanwhile; the lifetime ties it to the caller's borrow of the array.
    Some(unsafe { std::slice::from_raw_parts(data, len) })
}

/// Appends `values[start..start + length]` to `out` as int64; `false` (and nothing appended)
/// when there are not that many, or one is past the int64 range.
pub fn append_ints<T: IntElement>(
    values: &[T],
    start: usize,
    length: usize,
    out: &mut Slots<'_, i64>,
) -> bool {
    let Some(src) = int64_range(values, start, length) else {
        return false;
    };
    T::append_all(src, out);
    true
}

/// `values[start..start + length]` when it exists and every value fits int64.
fn int64_range<T: IntElement>(values: &[T], start: usize, length: usize) -> Option<&[T]> {
    let src = values.get(start..)?.get(..length)?;
    if !T::WIDENS && src.iter().any(|value| value.to_i64().is_none()) {
        return None;
    }
    Some(src)
}
