//! A shared-memory arena: one anonymous shared file (`memfd`) a DataLoader worker writes its
//! batches into, mapped once by the main process, which reads each batch in place.
//!
//! The file holds a header, then `slots` slots of `slot_bytes` bytes each (64-byte aligned).
//! The header keeps, in shared atomics, what both processes must agree on:
//!
//! - each slot's **holds**: one for the worker's claim while it writes, one for each view of the
//!   slot alive in the worker, one for each view sent to the main process and not yet freed
//!   there. The worker claims only a slot with no hold, so it never overwrites memory any view
//!   (in either process) still reads.
//! - the **attach word**: the number of views sent and not yet freed in the main process, a
//!   bit saying whether the main process holds the arena mapped, and a bit the worker sets
//!   when it writes no new batch into the arena (it made a larger one). The worker sends the
//!   file itself only while the mapped bit is clear. The main process keeps its mapping while
//!   the worker may still write batches there, and drops it once the arena is retired and the
//!   count is zero, clearing the bit in the same atomic step, so a view sent without the file
//!   always finds the mapping there.
//!
//! Linux only (`memfd_create`): elsewhere the module is not built and workers hand batches
//! over as torch does.

use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Set in the attach word while the main process holds the arena mapped.
const ATTACHED: u64 = 1 << 63;
/// Set in the attach word once the worker writes no new batch into the arena.
const RETIRED: u64 = 1 << 62;
/// The attach word's count of views sent and not freed.
const SENT: u64 = !(ATTACHED | RETIRED);
/// Marks a file as an arena of this layout (and version).
const MAGIC: u64 = 0x6661_7374_6172_6e31; // "fastarn1"
/// Slots and the header's end start on a cache line.
pub const ALIGNMENT: usize = 64;
/// Header words: attach word, magic, slots, slot bytes; then one hold counter per slot.
const COUNTERS_AT: usize = 32;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArenaError {
    /// A system call failed (its name and errno).
    System { call: &'static str, errno: i32 },
    /// A layout past the address space, a file that is not an arena of this layout, or a
    /// view that names no slot of an arena mapped here.
    Invalid(&'static str),
}

impl fmt::Display for ArenaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArenaError::System { call, errno } => write!(f, "{call} failed (errno {errno})"),
            ArenaError::Invalid(why) => write!(f, "{why}"),
        }
    }
}

/// The header's size and the whole file's size for `slots` slots of `slot_bytes` bytes
/// (`slot_bytes` a multiple of `ALIGNMENT`); an error past the address space.
pub fn file_bytes(slots: usize, slot_bytes: usize) -> Result<(usize, usize), ArenaError> {
    const TOO_LARGE: ArenaError =
        ArenaError::Invalid("an arena of this size is past the address space");
    if slots == 0 || slot_bytes == 0 || slot_bytes % ALIGNMENT != 0 {
        return Err(ArenaError::Invalid(
            "an arena needs slots of a positive multiple of 64 bytes",
        ));
    }
    let counters = slots.checked_mul(4).ok_or(TOO_LARGE)?;
    let header = (COUNTERS_AT + counters)
        .checked_next_multiple_of(ALIGNMENT)
        .ok_or(TOO_LARGE)?;
    let data = slots.checked_mul(slot_bytes).ok_or(TOO_LARGE)?;
    let total = header.checked_add(data).ok_or(TOO_LARGE)?;
    if isize::try_from(total).is_err() {
        return Err(TOO_LARGE);
    }
    Ok((header, total))
}

/// One mapping of a shared file, unmapped on drop. The file itself lives as long as any
/// process maps it or holds a descriptor of it.
pub struct Segment {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; every access to it goes through atomics (the
// header) or through slots whose holds keep writers out while readers read.
unsafe impl Send for Segment {}
// SAFETY: as above.
unsafe impl Sync for Segment {}

impl Segment {
    pub fn base(&self) -> *mut u8 {
        self.base
    }
}

mod system {
    use super::{ArenaError, Segment};
    use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

    fn errno(call: &'static str) -> ArenaError {
        ArenaError::System {
            call,
            errno: std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        }
    }

    fn map(fd: BorrowedFd<'_>, len: usize) -> Result<Segment, ArenaError> {
        // SAFETY: a fresh shared mapping of `len` bytes of the file; nothing else is touched.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(errno("mmap"));
        }
        Ok(Segment {
            base: base.cast(),
            len,
        })
    }

    /// A new shared file of `len` bytes (zeroed), its descriptor and a mapping of it.
    pub fn create(len: usize) -> Result<(Segment, OwnedFd), ArenaError> {
        // SAFETY: the name is a NUL-terminated literal; a new descriptor is returned or -1.
        let raw = unsafe { libc::memfd_create(c"fastcollate-arena".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(errno("memfd_create"));
        }
        // SAFETY: `raw` is a descriptor this function just opened and owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let size = libc::off_t::try_from(len).map_err(|_| {
            ArenaError::Invalid("an arena of this size is past the file size limit")
        })?;
        // SAFETY: sets the size of the file `fd` owns.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), size) } != 0 {
            return Err(errno("ftruncate"));
        }
        let segment = map(fd.as_fd(), len)?;
        Ok((segment, fd))
    }

    /// A mapping of the whole shared file `fd`.
    pub fn attach(fd: BorrowedFd<'_>) -> Result<Segment, ArenaError> {
        let (len, _) = identity(fd)?;
        map(fd, len)
    }

    /// The file's size and its identity (device, inode): two descriptors of one file have the
    /// same identity, and no other live file has it.
    pub fn identity(fd: BorrowedFd<'_>) -> Result<(usize, (u64, u64)), ArenaError> {
        // SAFETY: fstat writes the zeroed struct it is given.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `fd` is open (borrowed) and `stat` is a valid out-pointer.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } != 0 {
            return Err(errno("fstat"));
        }
        let len = usize::try_from(stat.st_size)
            .map_err(|_| ArenaError::Invalid("the shared file's size is not a size"))?;
        #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
        Ok((len, (stat.st_dev as u64, u64::from(stat.st_ino))))
    }

    impl Drop for Segment {
        fn drop(&mut self) {
            // SAFETY: `base..base + len` is this segment's own mapping; every view of it holds
            // the segment alive, so none is left when it drops.
            unsafe {
                libc::munmap(self.base.cast(), self.len);
            }
        }
    }
}

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// An arena mapped in this process: the worker's (which made it, and keeps its file to send)
/// or the main process's (which got the file once and mapped it).
pub struct Arena {
    segment: Segment,
    slots: usize,
    slot_bytes: usize,
    data_at: usize,
    /// Where the worker's next claim starts looking (round robin).
    next: AtomicUsize,
    file: Option<OwnedFd>,
    identity: (u64, u64),
}

impl Arena {
    /// A new arena of `slots` slots of `slot_bytes` bytes (a multiple of 64), made by the
    /// worker that writes it.
    pub fn create(slots: usize, slot_bytes: usize) -> Result<Arena, ArenaError> {
        let (data_at, total) = file_bytes(slots, slot_bytes)?;
        let (segment, file) = system::create(total)?;
        let (_, identity) = system::identity(file.as_fd())?;
        let arena = Arena {
            segment,
            slots,
            slot_bytes,
            data_at,
            next: AtomicUsize::new(0),
            file: Some(file),
            identity,
        };
        arena.word(1).store(MAGIC, Ordering::Relaxed);
        arena.word(2).store(slots as u64, Ordering::Relaxed);
        arena.word(3).store(slot_bytes as u64, Ordering::Release);
        Ok(arena)
    }

    /// The arena whose file is `fd`, mapped in the main process; its layout is read from the
    /// header and checked against the file's size.
    pub fn attach(fd: BorrowedFd<'_>) -> Result<Arena, ArenaError> {
        let (len, identity) = system::identity(fd)?;
        if len < COUNTERS_AT {
            return Err(ArenaError::Invalid(
                "the shared file is not a fastcollate arena",
            ));
        }
        let segment = system::attach(fd)?;
        let mut arena = Arena {
            segment,
            slots: 0,
            slot_bytes: 0,
            data_at: 0,
            next: AtomicUsize::new(0),
            file: None,
            identity,
        };
        if arena.word(1).load(Ordering::Acquire) != MAGIC {
            return Err(ArenaError::Invalid(
                "the shared file is not a fastcollate arena",
            ));
        }
        let slots = usize::try_from(arena.word(2).load(Ordering::Relaxed));
        let slot_bytes = usize::try_from(arena.word(3).load(Ordering::Relaxed));
        let (Ok(slots), Ok(slot_bytes)) = (slots, slot_bytes) else {
            return Err(ArenaError::Invalid("the arena's header is damaged"));
        };
        let (data_at, total) = file_bytes(slots, slot_bytes)?;
        if total != len {
            return Err(ArenaError::Invalid(
                "the arena's header does not match its size",
            ));
        }
        arena.slots = slots;
        arena.slot_bytes = slot_bytes;
        arena.data_at = data_at;
        Ok(arena)
    }

    /// The header's `index`th 8-byte word.
    fn word(&self, index: usize) -> &AtomicU64 {
        debug_assert!(index < 4);
        // SAFETY: the header's first 32 bytes are four 8-byte words, 8-byte aligned (the
        // mapping is page aligned), inside the mapping (checked at create / attach), and only
        // ever accessed atomically.
        unsafe { &*self.segment.base().add(index * 8).cast::<AtomicU64>() }
    }

    /// The hold counter of `slot` (< slots).
    fn holds(&self, slot: usize) -> &AtomicU32 {
        assert!(
            slot < self.slots,
            "slot {slot} of an arena of {}",
            self.slots
        );
        // SAFETY: the counters follow the four words, 4 bytes each, inside the header (whose
        // size `file_bytes` counted), 4-byte aligned, only ever accessed atomically.
        unsafe {
            &*self
                .segment
                .base()
                .add(COUNTERS_AT + slot * 4)
                .cast::<AtomicU32>()
        }
    }

    pub fn slots(&self) -> usize {
        self.slots
    }

    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// The file's identity (device, inode), which names the arena in both processes.
    pub fn identity(&self) -> (u64, u64) {
        self.identity
    }

    /// The worker's descriptor of the file (None in the main process).
    pub fn file(&self) -> Option<BorrowedFd<'_>> {
        self.file.as_ref().map(AsFd::as_fd)
    }

    /// The first byte of `slot`'s data (< slots).
    pub fn slot_start(&self, slot: usize) -> *mut u8 {
        assert!(
            slot < self.slots,
            "slot {slot} of an arena of {}",
            self.slots
        );
        // SAFETY: `data_at + slot * slot_bytes` is inside the mapping (file_bytes).
        unsafe {
            self.segment
                .base()
                .add(self.data_at + slot * self.slot_bytes)
        }
    }

    /// `bytes` bytes at `offset` of `slot`, when they lie inside it.
    pub fn span(&self, slot: usize, offset: usize, bytes: usize) -> Option<*mut u8> {
        if slot >= self.slots || offset.checked_add(bytes)? > self.slot_bytes {
            return None;
        }
        // SAFETY: inside the slot, checked above.
        Some(unsafe { self.slot_start(slot).add(offset) })
    }

    /// The slot and offset of the `bytes` bytes at `address`, when they lie inside one slot.
    pub fn locate(&self, address: usize, bytes: usize) -> Option<(usize, usize)> {
        let data = self.slot_start(0) as usize;
        let from_data = address.checked_sub(data)?;
        let slot = from_data / self.slot_bytes;
        let offset = from_data % self.slot_bytes;
        self.span(slot, offset, bytes)?;
        Some((slot, offset))
    }

    /// The worker claims a slot of at least `bytes` bytes that nothing holds: it then holds it
    /// once, until `release`. None when every slot is held or the slots are too small.
    pub fn claim(&self, bytes: usize) -> Option<usize> {
        if bytes > self.slot_bytes {
            return None;
        }
        let start = self.next.load(Ordering::Relaxed);
        for step in 0..self.slots {
            let slot = (start + step) % self.slots;
            // Acquire: every read of the slot by a view that released it happened before.
            if self
                .holds(slot)
                .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                self.next.store((slot + 1) % self.slots, Ordering::Relaxed);
                return Some(slot);
            }
        }
        None
    }

    /// One more hold on `slot` (a view of it made in this process).
    pub fn hold(&self, slot: usize) {
        self.holds(slot).fetch_add(1, Ordering::Relaxed);
    }

    /// One hold on `slot` let go; a slot never held is left as it is.
    pub fn release(&self, slot: usize) {
        // Release: this process's reads and writes of the slot happen before a new claim.
        let _ = self
            .holds(slot)
            .fetch_update(Ordering::Release, Ordering::Relaxed, |h| h.checked_sub(1));
    }

    /// The worker sends a view of `slot` to the main process: one hold for it, counted in the
    /// attach word. True when the main process holds the arena mapped (the view goes without
    /// the file), false when the file must go with it.
    pub fn send(&self, slot: usize) -> bool {
        self.hold(slot);
        self.word(0).fetch_add(1, Ordering::AcqRel) & ATTACHED != 0
    }

    /// The main process has mapped the arena: views sent from now on go without the file.
    pub fn mark_attached(&self) {
        self.word(0).fetch_or(ATTACHED, Ordering::AcqRel);
    }

    /// The worker writes no new batch into this arena (it made a larger one).
    pub fn retire(&self) {
        self.word(0).fetch_or(RETIRED, Ordering::AcqRel);
    }

    /// The main process frees a view it was sent of `slot`. True when the arena is retired
    /// and that was the last view sent and not freed: the arena is then marked unmapped and
    /// the caller drops its mapping (a view sent later comes with the file).
    pub fn release_sent(&self, slot: usize) -> bool {
        self.release(slot);
        let word = self.word(0);
        let previous = word.fetch_update(Ordering::AcqRel, Ordering::Relaxed, |w| {
            (w & SENT > 0).then(|| w - 1)
        });
        previous.is_ok_and(|w| w & SENT == 1) && self.detach_retired()
    }

    /// Marks the arena unmapped when it is retired and no view sent is alive or on its way;
    /// true when it did (the caller drops its mapping).
    pub fn detach_retired(&self) -> bool {
        self.word(0)
            .compare_exchange(
                ATTACHED | RETIRED,
                RETIRED,
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// Views sent to the main process and not freed there.
    #[cfg(test)]
    pub fn sent_views(&self) -> u64 {
        self.word(0).load(Ordering::Acquire) & SENT
    }

    /// Holds on `slot` (tests, diagnostics).
    pub fn holds_on(&self, slot: usize) -> u32 {
        self.holds(slot).load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_sizes_are_aligned_and_checked() {
        let (header, total) = file_bytes(4, 4096).unwrap();
        assert_eq!(header, 64);
        assert_eq!(total, 64 + 4 * 4096);
        assert_eq!(file_bytes(20, 64).unwrap().0, 128);
        assert!(file_bytes(0, 64).is_err());
        assert!(file_bytes(4, 100).is_err());
        assert!(file_bytes(usize::MAX / 2, 1 << 20).is_err());
    }

    #[test]
    fn the_main_process_reads_what_the_worker_wrote() {
        let worker = Arena::create(2, 128).unwrap();
        let slot = worker.claim(100).unwrap();
        let at = worker.span(slot, 64, 8).unwrap();
        // SAFETY: 8 bytes inside a claimed slot.
        unsafe { at.cast::<u64>().write(0x1234_5678) };
        let main = Arena::attach(worker.file().unwrap()).unwrap();
        assert_eq!(main.identity(), worker.identity());
        assert_eq!((main.slots(), main.slot_bytes()), (2, 128));
        let read = main.span(slot, 64, 8).unwrap();
        // SAFETY: 8 bytes inside the slot, in the other mapping of the same file.
        assert_eq!(unsafe { read.cast::<u64>().read() }, 0x1234_5678);
        assert_eq!(worker.locate(at as usize, 8), Some((slot, 64)));
        assert_eq!(worker.locate(at as usize, 65), None);
    }

    #[test]
    fn a_held_slot_is_never_claimed() {
        let arena = Arena::create(2, 64).unwrap();
        assert_eq!(arena.claim(65), None);
        let first = arena.claim(64).unwrap();
        let second = arena.claim(64).unwrap();
        assert_ne!(first, second);
        assert_eq!(arena.claim(1), None);
        arena.hold(first); // a view of it
        arena.release(first); // the claim
        assert_eq!(arena.claim(1), None);
        arena.release(first); // the view
        assert_eq!(arena.claim(1), Some(first));
        arena.release(7 % 2); // releasing past zero leaves zero
        arena.release(7 % 2);
        assert_eq!(arena.holds_on(1), 0);
    }

    #[test]
    fn the_file_goes_with_a_view_until_the_main_process_holds_the_mapping() {
        let worker = Arena::create(2, 64).unwrap();
        let slot = worker.claim(8).unwrap();
        assert!(!worker.send(slot)); // not mapped there yet: with the file
        let main = Arena::attach(worker.file().unwrap()).unwrap();
        main.mark_attached();
        assert!(worker.send(slot)); // mapped: without it
        assert_eq!(worker.sent_views(), 2);
        assert!(!main.release_sent(slot));
        assert!(!main.release_sent(slot)); // the worker may still write there: kept
        assert!(worker.send(slot));
        worker.retire();
        assert!(main.release_sent(slot)); // retired, the last: the mapping goes
        assert_eq!(worker.sent_views(), 0);
        assert!(!worker.send(slot)); // so the next view takes the file again
        worker.release(slot);
        assert_eq!(worker.holds_on(slot), 1); // the claim
    }

    #[test]
    fn a_view_sent_while_the_last_is_freed_keeps_the_mapping() {
        let worker = Arena::create(1, 64).unwrap();
        let main = Arena::attach(worker.file().unwrap()).unwrap();
        let slot = worker.claim(8).unwrap();
        assert!(!worker.send(slot));
        main.mark_attached();
        worker.retire();
        // The worker sends again before the main process frees the first view.
        assert!(worker.send(slot));
        assert!(!main.release_sent(slot));
        assert!(main.release_sent(slot));
        // Freeing more than was sent changes nothing.
        assert!(!main.release_sent(slot));
        assert_eq!(worker.sent_views(), 0);
    }
}
