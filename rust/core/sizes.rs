//! The one sizing rule every batch-sized buffer passes before anything is reserved: its bytes
//! (the product of its shape and its element size, in checked arithmetic) against what this
//! machine can allocate.
//!
//! Why a bound at all: numpy (and so transformers) allocates through the C library, whose large
//! blocks the kernel's default overcommit heuristic refuses when one asks for more than the
//! machine's memory and swap together, so an impossible array is a `MemoryError` at once. The
//! extension's allocator maps large blocks without that check: an impossible buffer would be
//! mapped, then written until the kernel's OOM killer ends a process, maybe another one. The
//! rule refuses those sizes up front, with no resource limit needed.
//!
//! The bound is the kernel's own: total memory plus swap (`sysinfo`) on Linux; elsewhere
//! `isize::MAX`, the most one Rust allocation may take (a failed allocation is then the
//! allocator's error, still raised, never an abort: every buffer is reserved fallibly). A
//! cgroup's lower limit is not read: numpy does not heed it either.
//!
//! Two outcomes: a size past the address space (the product overflows, or passes
//! `isize::MAX`), and a size past the machine's memory. The binding layer raises the first as
//! `ValueError` and the second as `MemoryError`, as numpy does.

use std::sync::OnceLock;

use crate::core::error::CollateError;

/// Why a buffer of some shape cannot be reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeError {
    /// Its byte count overflows or passes `isize::MAX`: no allocation could hold it.
    Unaddressable,
    /// It needs `bytes`, more than the `limit` this machine can allocate.
    OverMemory { bytes: usize, limit: usize },
}

/// The number of elements of a buffer of `shape` whose elements take `item` bytes, when its
/// bytes fit under `limit` (and `isize::MAX`). The rule itself, with the bound given, so that
/// tests can choose it.
pub fn elements_within(shape: &[usize], item: usize, limit: usize) -> Result<usize, SizeError> {
    let elements = shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or(SizeError::Unaddressable)?;
    let bytes = elements
        .checked_mul(item)
        .filter(|&bytes| bytes <= isize::MAX as usize)
        .ok_or(SizeError::Unaddressable)?;
    if bytes > limit {
        return Err(SizeError::OverMemory { bytes, limit });
    }
    Ok(elements)
}

/// The number of elements of a buffer of `shape` of `item`-byte elements, checked against what
/// this machine can allocate ([`allocatable_bytes`]).
pub fn elements(shape: &[usize], item: usize) -> Result<usize, SizeError> {
    elements_within(shape, item, allocatable_bytes())
}

/// The number of `T`s in the output `key` of `shape`, or the error naming the key, the shape
/// and the bytes: `OutputTooLarge` past the address space, `NotEnoughMemory` past this
/// machine's memory. Every batch-sized output passes here before it is reserved.
pub fn output_elements<T>(key: &str, shape: &[usize]) -> Result<usize, CollateError> {
    checked_output(
        key,
        shape,
        std::mem::size_of::<T>().max(1),
        dtype_name::<T>(),
    )
}

/// `output_elements` for an element type named at run time (`dtype`, of `item` bytes): what
/// the Python side asks before it makes an array of a size it computed from options.
pub fn checked_output(
    key: &str,
    shape: &[usize],
    item: usize,
    dtype: &str,
) -> Result<usize, CollateError> {
    elements(shape, item).map_err(|err| match err {
        SizeError::Unaddressable => CollateError::OutputTooLarge {
            key: key.into(),
            shape: shape.to_vec(),
        },
        SizeError::OverMemory { bytes, limit } => CollateError::NotEnoughMemory {
            key: key.into(),
            shape: shape.to_vec(),
            dtype: dtype.into(),
            bytes,
            limit,
        },
    })
}

/// The outputs of one call together, `(key, bytes)` each (every one already within the rule
/// alone), checked against what this machine can allocate: a batch whose buffers fit one by one
/// but not together is refused before the first is reserved.
pub fn check_batch(outputs: &[(&str, usize)]) -> Result<(), CollateError> {
    batch_within(outputs, allocatable_bytes())
}

/// `check_batch` with the bound given.
pub fn batch_within(outputs: &[(&str, usize)], limit: usize) -> Result<(), CollateError> {
    let total = outputs
        .iter()
        .try_fold(0usize, |sum, &(_, bytes)| sum.checked_add(bytes));
    match total {
        Some(bytes) if bytes <= limit => Ok(()),
        total => Err(CollateError::BatchTooLarge {
            keys: outputs.iter().map(|&(key, _)| key.to_string()).collect(),
            bytes: total.unwrap_or(usize::MAX),
            limit,
        }),
    }
}

/// The most bytes one buffer may take: total memory plus swap on Linux, `isize::MAX` elsewhere
/// (or where the kernel does not answer). Read once per process.
pub fn allocatable_bytes() -> usize {
    static BOUND: OnceLock<usize> = OnceLock::new();
    *BOUND.get_or_init(|| machine_memory().unwrap_or(isize::MAX as usize))
}

#[cfg(target_os = "linux")]
fn machine_memory() -> Option<usize> {
    // SAFETY: an all-zero `sysinfo` is a valid value of this plain C struct (integers and a
    // padding array), and `sysinfo` only writes into the struct it is given.
    let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is a valid, writable `sysinfo` that lives across the call.
    if unsafe { libc::sysinfo(&mut info) } != 0 {
        return None;
    }
    let unit = u64::from(info.mem_unit).max(1);
    // `c_ulong` is 32 bits on 32-bit targets: widened before the sum.
    #[allow(clippy::useless_conversion)]
    let units = u64::from(info.totalram).checked_add(u64::from(info.totalswap))?;
    let bytes = usize::try_from(units.checked_mul(unit)?).ok()?;
    // A kernel that reports no memory is not believed.
    (bytes > 0).then_some(bytes.min(isize::MAX as usize))
}

#[cfg(not(target_os = "linux"))]
fn machine_memory() -> Option<usize> {
    None
}

/// numpy's name for a buffer element type, for messages (`int64`, `float32`, ...).
pub fn dtype_name<T>() -> &'static str {
    match std::any::type_name::<T>() {
        "i64" => "int64",
        "i32" => "int32",
        "i16" => "int16",
        "i8" => "int8",
        "u64" => "uint64",
        "u32" => "uint32",
        "u16" => "uint16",
        "u8" => "uint8",
        "f64" => "float64",
        "f32" => "float32",
        "bool" => "bool",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_elements_within_the_bound() {
        assert_eq!(elements_within(&[3, 4], 8, 96), Ok(12));
        assert_eq!(elements_within(&[2, 3, 5], 4, usize::MAX), Ok(30));
        assert_eq!(elements_within(&[], 8, 8), Ok(1));
        assert_eq!(elements_within(&[0, usize::MAX], 8, 0), Ok(0));
    }

    #[test]
    fn one_byte_over_the_bound_is_over_memory() {
        assert_eq!(
            elements_within(&[3, 4], 8, 95),
            Err(SizeError::OverMemory {
                bytes: 96,
                limit: 95
            })
        );
    }

    #[test]
    fn overflow_is_an_error_not_a_wrap() {
        assert_eq!(
            elements_within(&[1 << 40, 1 << 40], 1, usize::MAX),
            Err(SizeError::Unaddressable)
        );
        assert_eq!(
            elements_within(&[usize::MAX / 4 + 1], 8, usize::MAX),
            Err(SizeError::Unaddressable)
        );
        // Past isize::MAX without overflowing usize: no allocation can take it either.
        assert_eq!(
            elements_within(&[(isize::MAX as usize) / 8 + 1], 8, usize::MAX),
            Err(SizeError::Unaddressable)
        );
    }

    #[test]
    fn the_machine_bound_is_positive_and_refuses_impossible_sizes() {
        let bound = allocatable_bytes();
        assert!(bound > 0 && bound <= isize::MAX as usize);
        assert_eq!(elements(&[1, 1024], 8), Ok(1024));
        #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
        {
            // 16 TiB: past the machines this runs on, within the address space.
            assert!(bound < 1 << 44, "a machine of {bound} bytes");
            assert!(matches!(
                elements(&[2, 1 << 40], 8),
                Err(SizeError::OverMemory { bytes, .. }) if bytes == 1 << 44
            ));
        }
    }

    #[test]
    fn output_errors_name_the_key_shape_and_bytes() {
        assert_eq!(output_elements::<i64>("ids", &[2, 3]), Ok(6));
        let err = output_elements::<i64>("ids", &[3, usize::MAX]).unwrap_err();
        assert_eq!(
            err,
            CollateError::OutputTooLarge {
                key: "ids".into(),
                shape: vec![3, usize::MAX]
            }
        );
        #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
        {
            let err = output_elements::<i64>("input_ids", &[2, 1 << 40]).unwrap_err();
            let text = err.to_string();
            assert!(
                text.starts_with("not enough memory for 'input_ids': unable to allocate 16.00 TiB")
                    && text.contains("shape (2, 1099511627776) and data type int64"),
                "{text}"
            );
            assert_eq!(err.class(), crate::core::error::ErrorClass::Memory);
        }
    }

    #[test]
    fn a_batch_is_checked_as_a_whole() {
        assert_eq!(batch_within(&[("a", 40), ("b", 60)], 100), Ok(()));
        let err = batch_within(&[("a", 40), ("b", 61)], 100).unwrap_err();
        assert_eq!(
            err,
            CollateError::BatchTooLarge {
                keys: vec!["a".into(), "b".into()],
                bytes: 101,
                limit: 100
            }
        );
        assert!(err
            .to_string()
            .starts_with("not enough memory for 'a', 'b' together"));
        let err = batch_within(&[("a", usize::MAX), ("b", 1)], usize::MAX).unwrap_err();
        assert!(matches!(
            err,
            CollateError::BatchTooLarge {
                bytes: usize::MAX,
                ..
            }
        ));
    }

    #[test]
    fn names_dtypes_as_numpy_does() {
        assert_eq!(dtype_name::<i64>(), "int64");
        assert_eq!(dtype_name::<f32>(), "float32");
    }
}
