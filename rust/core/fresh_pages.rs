//! How a large output buffer's fresh pages are mapped when it is first written.
//!
//! A fresh allocation's pages are mapped on first touch. On a virtual machine whose host takes
//! back the guest's free 2 MiB blocks (free page reporting, as Firecracker and many cloud VMs
//! do), a transparent huge page is such a block, and its first touch waits for the host to
//! back it again, which is much slower than mapping 4 KiB pages the guest hands out from
//! memory it already holds. mimalloc asks for huge pages on its
//! arenas (`MADV_HUGEPAGE`), so a large output would take the slow path on its first call.
//! `prefer_small_pages` asks for 4 KiB pages on the buffer instead; the threads that write it
//! then map its pages as they go.
//!
//! (Mapping the pages ahead with `MADV_POPULATE_WRITE` from each writing thread does not help:
//! it gains nothing on the first call and costs on later ones, where the pages are mapped
//! already.)

/// Buffers below this many bytes keep the allocator's pages.
pub const SMALL_PAGES_FROM_BYTES: usize = 32 << 20;

/// Asks the kernel to map the whole pages inside a large `buffer` as 4 KiB pages. A hint:
/// where it is not taken (another OS, a kernel without transparent huge pages), the buffer is
/// mapped as before, with the same contents.
pub fn prefer_small_pages<T>(buffer: &mut [T]) {
    if std::mem::size_of_val(buffer) >= SMALL_PAGES_FROM_BYTES {
        advise_small_pages(buffer);
    }
}

#[cfg(target_os = "linux")]
fn advise_small_pages<T>(buffer: &mut [T]) {
    // SAFETY: sysconf only reads a configuration value.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let Ok(page) = usize::try_from(page) else {
        return;
    };
    if !page.is_power_of_two() {
        return;
    }
    let start = buffer.as_mut_ptr() as usize;
    let bytes = std::mem::size_of_val(buffer);
    // The whole pages inside the buffer: no other allocation's bytes share them.
    let Some(first) = start.checked_add(page - 1).map(|at| at & !(page - 1)) else {
        return;
    };
    let end = start.saturating_add(bytes) & !(page - 1);
    if end <= first {
        return;
    }
    // SAFETY: `first..end` lies inside `buffer`, which this function borrows mutably, so no
    // other code uses those bytes meanwhile, and MADV_NOHUGEPAGE does not change them: it only
    // sets how the range's later page faults are served. A failure (EINVAL where transparent
    // huge pages are not built in, ENOMEM) leaves the range as it was and is ignored.
    unsafe {
        libc::madvise(
            first as *mut libc::c_void,
            end - first,
            libc::MADV_NOHUGEPAGE,
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_small_pages<T>(_buffer: &mut [T]) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_buffer_keeps_its_bytes() {
        let mut buffer: Vec<u8> = (0..SMALL_PAGES_FROM_BYTES + 12_345)
            .map(|i| (i % 251) as u8)
            .collect();
        let expected = buffer.clone();
        prefer_small_pages(&mut buffer[3..]);
        assert_eq!(buffer, expected);
        // Written after the advice: the pages map as before.
        buffer[SMALL_PAGES_FROM_BYTES] = 7;
        assert_eq!(buffer[SMALL_PAGES_FROM_BYTES], 7);
    }

    #[test]
    fn small_and_empty_buffers_are_left_alone() {
        let mut empty: [u64; 0] = [];
        prefer_small_pages(&mut empty);
        let mut small = vec![7u8; 100];
        prefer_small_pages(&mut small[1..]);
        assert_eq!(small, vec![7u8; 100]);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_large_uninitialised_buffer_is_advised_without_being_read() {
        let mut buffer: Vec<u8> = Vec::with_capacity(SMALL_PAGES_FROM_BYTES * 2);
        prefer_small_pages(buffer.spare_capacity_mut());
        buffer.resize(SMALL_PAGES_FROM_BYTES * 2, 3);
        assert!(buffer.iter().all(|&b| b == 3));
    }
}
