//! Python ints read straight from CPython's objects: a list's or tuple's item array walked
//! without a reference count or a `Bound` per item, and small ints' digits read in place.
//! All of this crate's raw-FFI int reading is here, with its safety arguments; it is compiled
//! only where it is sound (CPython with a GIL and the full C API: `cfg(raw_int_reads)`, which
//! `build.rs` decides once from PyO3's cfgs), and everywhere else the same functions take the
//! safe way.

use std::mem::MaybeUninit;

use pyo3::prelude::*;
#[cfg(raw_int_reads)]
use pyo3::sync::PyOnceLock;
#[cfg(not(raw_int_reads))]
use pyo3::types::PyInt;

use crate::core::column::Column;
use crate::core::pad::Slots;

/// The item array of a list (`is_list`) or tuple; empty when it has no items.
///
/// # Safety
/// `sequence` must be a list when `is_list`, else a tuple. The slice borrows the items: it may
/// be used only while nothing can run Python code or change the sequence (attached, in a build
/// with a GIL, calling nothing that may call back into Python).
#[cfg(raw_int_reads)]
unsafe fn sequence_items<'a>(
    sequence: &'a Bound<'_, PyAny>,
    is_list: bool,
) -> &'a [*mut pyo3::ffi::PyObject] {
    use pyo3::ffi;
    let ptr = sequence.as_ptr();
    // An empty list may have no item array, so the length is checked before it is touched.
    let (len, first) = if is_list {
        let list = ptr.cast::<ffi::PyListObject>();
        (ffi::PyList_GET_SIZE(ptr), (*list).ob_item)
    } else {
        let tuple = ptr.cast::<ffi::PyTupleObject>();
        let first = std::ptr::addr_of_mut!((*tuple).ob_item).cast::<*mut ffi::PyObject>();
        (ffi::PyTuple_GET_SIZE(ptr), first)
    };
    if len <= 0 || first.is_null() {
        return &[];
    }
    std::slice::from_raw_parts(first, len as usize)
}

/// The value of an exact int: read in place when it is small (`inline`: ints have the layout
/// `small_int_value` reads), else through `PyLong_AsLongLongAndOverflow`. `None`: out of the
/// int64 range.
///
/// # Safety
/// `item` must be a live exact `int`.
#[cfg(raw_int_reads)]
#[inline(always)]
unsafe fn exact_int_value(item: *mut pyo3::ffi::PyObject, inline: bool) -> Option<i64> {
    if inline {
        if let Some(value) = small_int_value(item) {
            return Some(value);
        }
    }
    let mut overflow = 0;
    let value = pyo3::ffi::PyLong_AsLongLongAndOverflow(item, &mut overflow);
    (overflow == 0).then_some(value)
}

/// Pushes the leading run of exact Python ints in the int64 range of a list (`is_list`) or
/// tuple, read from its item array (no reference count, `Bound` or extraction call per item);
/// returns how many items it took (it stops before an int past the int64 range, which the
/// caller reads item by item): much less work per item than reading item by item.
#[cfg(raw_int_reads)]
pub fn read_exact_ints(column: &mut Column, sequence: &Bound<'_, PyAny>, is_list: bool) -> usize {
    use pyo3::ffi;
    // SAFETY: the caller checked the sequence's type. Nothing below runs Python code (an exact
    // int converts without calling back into Python) and the interpreter stays attached, so the
    // items stay alive and the sequence unchanged while `items` is used; in both loops below,
    // `items` holds live objects.
    let items = unsafe { sequence_items(sequence, is_list) };
    let run = items
        .iter()
        // SAFETY: each item is a live object (see above).
        .position(|&item| unsafe { ffi::PyLong_CheckExact(item) } == 0)
        .unwrap_or(items.len());
    if run == 0 {
        // Nothing pushed: an int push would turn a column of bools into ints.
        return 0;
    }
    let before = column.values_len();
    // A second pass over a run known to be exact ints: an exact-size loop with no exit.
    let inline = int_digits_are_30_bit(sequence.py());
    let mut overflow_at = None;
    column.extend_ints(items[..run].iter().enumerate().map(|(position, &item)| {
        // SAFETY: `item` is live (see above) and, in this run, an exact int.
        let value = unsafe { exact_int_value(item, inline) };
        if value.is_none() && overflow_at.is_none() {
            overflow_at = Some(position);
        }
        value.unwrap_or(-1)
    }));
    match overflow_at {
        None => run,
        Some(position) => {
            // The run's tail from the int past int64 on is taken back, for the caller to read.
            column.truncate_values(before.saturating_add(position));
            position
        }
    }
}

/// Without the raw item array (no GIL, the limited API, PyPy, GraalPy) nothing is read here:
/// the caller reads every item.
#[cfg(not(raw_int_reads))]
pub fn read_exact_ints(
    _column: &mut Column,
    _sequence: &Bound<'_, PyAny>,
    _is_list: bool,
) -> usize {
    0
}

/// Writes a list's (`is_list`) or tuple's items into `place`, which is as long as it, when
/// every item is an exact int in the int64 range; `false` otherwise (`place` is then partly
/// written, for the caller to discard). The reader's safe fallback, and the benchmark's floor
/// (`bindings::floor`), which reads a list as the reader does.
pub fn write_exact_ints(sequence: &Bound<'_, PyAny>, is_list: bool, place: &mut [i64]) -> bool {
    // SAFETY: viewing initialised `i64`s as `MaybeUninit` (same layout); only initialised
    // values are written through the view, so they stay initialised.
    let place = unsafe { &mut *(std::ptr::from_mut(place) as *mut [MaybeUninit<i64>]) };
    write_exact_ints_from(sequence, is_list, 0, place, true)
}

/// Writes `place.len()` items of a list (`is_list`) or tuple from item `start` on into `place`
/// (all of its items, from `start`, when `whole`), when every one is an exact int in the int64
/// range: every slot is then set. `false` otherwise, or when the sequence is too short
/// (`place` is then partly written, for the caller to discard).
pub fn write_exact_ints_from(
    sequence: &Bound<'_, PyAny>,
    is_list: bool,
    start: usize,
    place: &mut [MaybeUninit<i64>],
    whole: bool,
) -> bool {
    #[cfg(raw_int_reads)]
    {
        // SAFETY: as in `read_exact_ints`: the caller checked the type, and nothing here runs
        // Python code.
        let all = unsafe { sequence_items(sequence, is_list) };
        let end = start.saturating_add(place.len());
        if whole && end != all.len() {
            return false;
        }
        let Some(items) = all.get(start..end) else {
            return false;
        };
        write_items(sequence.py(), items, place)
    }
    #[cfg(not(raw_int_reads))]
    {
        let _ = is_list;
        match sequence.len() {
            Ok(len) if len >= start.saturating_add(place.len()) => {
                if whole && len != start.saturating_add(place.len()) {
                    return false;
                }
            }
            _ => return false,
        }
        let Ok(items) = sequence.try_iter() else {
            return false;
        };
        let mut written = 0;
        for (slot, item) in place.iter_mut().zip(items.skip(start)) {
            let Ok(item) = item else { return false };
            if !item.is_exact_instance_of::<PyInt>() {
                return false;
            }
            let Ok(value) = item.extract::<i64>() else {
                return false;
            };
            slot.write(value);
            written += 1;
        }
        written == place.len()
    }
}

/// Writes `items` (live objects) into `place`, as long as it, when every one is an exact int
/// in the int64 range; `false` otherwise. Every slot of `place` is written when it returns
/// `true`.
#[cfg(raw_int_reads)]
#[inline(always)]
fn write_items(
    py: Python<'_>,
    items: &[*mut pyo3::ffi::PyObject],
    place: &mut [MaybeUninit<i64>],
) -> bool {
    use pyo3::ffi;
    if items.len() != place.len() {
        return false;
    }
    let inline = int_digits_are_30_bit(py);
    let small = small_ints(py);
    for (slot, &item) in place.iter_mut().zip(items) {
        // A cached small int (every 0 and 1 of a mask) is known from its address alone.
        if let Some(value) = small.and_then(|small| small.value_at(item)) {
            slot.write(value);
            continue;
        }
        // SAFETY: `item` is live (the caller's guarantee) and checked to be an exact int
        // before it is read.
        if unsafe { ffi::PyLong_CheckExact(item) } == 0 {
            return false;
        }
        // SAFETY: `item` is live and was just checked to be an exact int.
        match unsafe { exact_int_value(item, inline) } {
            Some(value) => {
                slot.write(value);
            }
            None => return false,
        }
    }
    true
}

/// Appends a list's (`is_list`) or tuple's items to `out` when it holds exactly `length` items,
/// every one an exact int in the int64 range; `false` otherwise (`out` then unchanged). The
/// values are written once, into `out`'s spare slots (no zero fill first); `false` when it has
/// fewer than `length` left.
pub fn append_exact_ints(
    sequence: &Bound<'_, PyAny>,
    is_list: bool,
    out: &mut Slots<'_, i64>,
    length: usize,
) -> bool {
    if out.try_reserve(length).is_err() {
        return false;
    }
    #[cfg(raw_int_reads)]
    {
        // SAFETY: as in `read_exact_ints`: the caller checked the type, and nothing here runs
        // Python code.
        let items = unsafe { sequence_items(sequence, is_list) };
        if items.len() != length {
            return false;
        }
        let start = out.len();
        let Some(place) = out.spare_capacity_mut().get_mut(..length) else {
            return false;
        };
        if !write_items(sequence.py(), items, place) {
            return false;
        }
        // SAFETY: the `length` slots after `start` are within the capacity (reserved above)
        // and `write_items` wrote every one of them (it returned true).
        unsafe { out.set_len(start + length) };
        true
    }
    #[cfg(not(raw_int_reads))]
    {
        let start = out.len();
        out.resize(start + length, 0);
        if write_exact_ints(sequence, is_list, &mut out.written()[start..]) {
            true
        } else {
            out.truncate(start);
            false
        }
    }
}

/// CPython's cached small ints (`-5..=256` on every version so far): one static array of int
/// objects, each the only object of its value, so that an item's address alone says whether
/// it is one and which. Found and checked once per process by asking CPython for every value
/// in the range and checking each object sits where the array layout puts it; `None` (every
/// int read the usual way) when they do not.
#[cfg(raw_int_reads)]
#[derive(Clone, Copy)]
struct SmallInts {
    /// The address of the object for `FIRST`.
    base: usize,
    /// The array's size in bytes.
    span: usize,
    /// log2 of an object's size in the array.
    shift: u32,
}

#[cfg(raw_int_reads)]
impl SmallInts {
    const FIRST: i64 = -5;
    const LAST: i64 = 256;

    /// The value of `item` when it is one of the cached small ints.
    #[inline(always)]
    fn value_at(self, item: *mut pyo3::ffi::PyObject) -> Option<i64> {
        let offset = (item as usize).wrapping_sub(self.base);
        // Within the array, an object's address is the start of an element: `offset` is a
        // multiple of the element size.
        (offset < self.span).then(|| (offset >> self.shift) as i64 + Self::FIRST)
    }

    fn find(py: Python<'_>) -> Option<SmallInts> {
        use pyo3::IntoPyObject;
        // Two lookups of each value: the same object both times, else it is not cached.
        let address = |value: i64| -> Option<usize> {
            let first = value.into_pyobject(py).ok()?;
            let second = value.into_pyobject(py).ok()?;
            (first.as_ptr() == second.as_ptr()
                && first.get_type().is(py.get_type::<pyo3::types::PyInt>()))
            .then(|| first.as_ptr() as usize)
        };
        let base = address(Self::FIRST)?;
        let stride = address(Self::FIRST + 1)?.checked_sub(base)?;
        if !stride.is_power_of_two() || stride < std::mem::size_of::<pyo3::ffi::PyObject>() {
            return None;
        }
        let count = usize::try_from(Self::LAST - Self::FIRST + 1).ok()?;
        for (index, value) in (Self::FIRST..=Self::LAST).enumerate() {
            if address(value)? != base.checked_add(index.checked_mul(stride)?)? {
                return None;
            }
        }
        Some(SmallInts {
            base,
            span: count.checked_mul(stride)?,
            shift: stride.trailing_zeros(),
        })
    }
}

#[cfg(raw_int_reads)]
fn small_ints(py: Python<'_>) -> Option<SmallInts> {
    static SMALL_INTS: PyOnceLock<Option<SmallInts>> = PyOnceLock::new();
    *SMALL_INTS.get_or_init(py, || SmallInts::find(py))
}

/// Whether ints are stored in 30-bit digits held in `u32`s, as `small_int_value` reads them:
/// every mainstream CPython build, checked once from `sys.int_info`.
#[cfg(raw_int_reads)]
fn int_digits_are_30_bit(py: Python<'_>) -> bool {
    static INT_DIGITS_ARE_30_BIT: PyOnceLock<bool> = PyOnceLock::new();
    *INT_DIGITS_ARE_30_BIT.get_or_init(py, || {
        let check = || -> PyResult<bool> {
            let info = py.import("sys")?.getattr("int_info")?;
            Ok(info.getattr("bits_per_digit")?.extract::<u32>()? == 30
                && info.getattr("sizeof_digit")?.extract::<u32>()? == 4)
        };
        check().unwrap_or(false)
    })
}

/// The value of an exact int of at most one digit (below 2**30 in magnitude: every token id),
/// read in place as CPython's `PyLong_AsLongLong` reads it first (and Cython's int conversion
/// does), without a call per token. `None`: a bigger int, for `PyLong_AsLongLongAndOverflow`.
///
/// # Safety
/// `item` must be a live exact `int`, and ints must use 30-bit digits in `u32`s.
#[cfg(all(raw_int_reads, not(Py_3_12)))]
#[inline(always)]
unsafe fn small_int_value(item: *mut pyo3::ffi::PyObject) -> Option<i64> {
    // CPython <= 3.11 `PyLongObject` (Include/cpython/longintrepr.h): a var-object header whose
    // size is the signed digit count, then the digits.
    #[repr(C)]
    struct PyLongObject {
        ob_base: pyo3::ffi::PyVarObject,
        ob_digit: [u32; 1],
    }
    let long = item.cast::<PyLongObject>();
    match (*long).ob_base.ob_size {
        0 => Some(0),
        1 => Some(i64::from((*long).ob_digit[0])),
        -1 => Some(-i64::from((*long).ob_digit[0])),
        _ => None,
    }
}

/// The same for CPython 3.12 to 3.14, whose ints keep the digit count and sign in one tag: this
/// is `PyUnstable_Long_IsCompact` / `PyUnstable_Long_CompactValue` (static inline in CPython's
/// headers, so not callable from Rust), written out.
///
/// # Safety
/// `item` must be a live exact `int`, and ints must use 30-bit digits in `u32`s.
#[cfg(all(raw_int_reads, Py_3_12, not(Py_3_15)))]
#[inline(always)]
unsafe fn small_int_value(item: *mut pyo3::ffi::PyObject) -> Option<i64> {
    // Include/cpython/longintrepr.h (3.12-3.14): `lv_tag` is `digits << 3 | flags`, where the
    // low two flag bits are the sign (0 positive, 1 zero, 2 negative) and the third is
    // reserved (3.14 marks immortal small ints with it). Compact means at most one digit.
    #[repr(C)]
    struct PyLongObject {
        ob_base: pyo3::ffi::PyObject,
        lv_tag: usize,
        ob_digit: [u32; 1],
    }
    const NON_SIZE_BITS: u32 = 3;
    const SIGN_MASK: usize = 3;
    let long = item.cast::<PyLongObject>();
    let tag = (*long).lv_tag;
    if tag >= 2 << NON_SIZE_BITS {
        return None;
    }
    let digit = i64::from((*long).ob_digit[0]);
    match tag & SIGN_MASK {
        0 => Some(digit),
        1 => Some(0),
        2 => Some(-digit),
        _ => None,
    }
}

/// Layouts this crate has not been checked against (a future CPython): every int goes through
/// the C API.
#[cfg(all(raw_int_reads, Py_3_15))]
#[inline(always)]
unsafe fn small_int_value(_item: *mut pyo3::ffi::PyObject) -> Option<i64> {
    None
}
