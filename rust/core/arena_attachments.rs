//! The arenas this process maps as the receiving side (the DataLoader's main process), and the
//! holds each view of a slot keeps, in either process.
//!
//! A worker's arena is mapped here when the first view of it arrives with its file, and kept
//! while the worker may write batches there; once the worker retires it (it made a larger
//! one), it is dropped when no view the worker sent is alive or on its way
//! (`Arena::release_sent`). The arena of a worker that is gone is dropped with its last view
//! alive here (a view it sent and that never arrived does not keep it), or, when none is left,
//! at the next arena mapped or `sweep`. The mapping itself goes when its last view here dies.

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard};

use super::shared_arena::{Arena, ArenaError};

/// Whether the worker that made an arena still runs.
enum Owner {
    /// A pidfd: readable once the process has exited.
    Watched(OwnedFd),
    /// No pidfd (an old kernel): the pid, probed with signal 0.
    Pid(i32),
}

impl Owner {
    fn of(pid: i32) -> Owner {
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        match i32::try_from(raw) {
            // SAFETY: a descriptor the call just opened for this process to own.
            Ok(fd) if fd >= 0 => Owner::Watched(unsafe { OwnedFd::from_raw_fd(fd) }),
            _ => Owner::Pid(pid),
        }
    }

    fn gone(&self) -> bool {
        match self {
            Owner::Watched(fd) => {
                let mut poll = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd, no wait.
                let ready = unsafe { libc::poll(&mut poll, 1, 0) };
                ready > 0 && poll.revents & libc::POLLIN != 0
            }
            Owner::Pid(pid) => {
                // SAFETY: signal 0 only checks that the process exists.
                let sent = unsafe { libc::kill(*pid, 0) };
                sent != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
            }
        }
    }
}

struct Mapped {
    arena: Arc<Arena>,
    /// The worker, where the view that brought the file named it.
    owner: Option<Owner>,
}

impl Mapped {
    /// The worker that made the arena has exited.
    fn owner_gone(&self) -> bool {
        self.owner.as_ref().is_some_and(Owner::gone)
    }

    /// No view of the arena is alive here (the map holds the only reference), and none can
    /// arrive any more: its worker is gone, or it is retired with no view on its way.
    fn abandoned(&self) -> bool {
        Arc::strong_count(&self.arena) == 1 && (self.owner_gone() || self.arena.detach_retired())
    }
}

/// The arenas mapped here, by identity (their file's device and inode).
pub struct Attachments {
    arenas: Mutex<Option<HashMap<(u64, u64), Mapped>>>,
}

static ATTACHMENTS: Attachments = Attachments {
    arenas: Mutex::new(None),
};

/// This process's attachments.
pub fn attachments() -> &'static Attachments {
    &ATTACHMENTS
}

impl Attachments {
    fn lock(&self) -> MutexGuard<'_, Option<HashMap<(u64, u64), Mapped>>> {
        // A panic never happens under this lock; a poisoned one still holds consistent maps.
        self.arenas
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A view of `slot` of the arena `identity` arrives, with the arena's file when the worker
    /// sent it (`file`, from the worker `owner_pid`). The returned view holds the slot until it
    /// drops. An arena not mapped here yet is mapped from `file`; without one that is an error
    /// (a view can only come without the file while this process keeps the arena mapped).
    pub fn receive(
        &self,
        identity: (u64, u64),
        file: Option<OwnedFd>,
        owner_pid: Option<i32>,
        slot: usize,
    ) -> Result<SentView, ArenaError> {
        let mut guard = self.lock();
        let arenas = guard.get_or_insert_with(HashMap::new);
        let arena = match arenas.get(&identity) {
            Some(mapped) => {
                within(&mapped.arena, slot)?;
                Arc::clone(&mapped.arena)
            }
            None => {
                let Some(file) = file else {
                    return Err(ArenaError::Invalid(
                        "a batch view arrived from a DataLoader worker whose arena this process no longer maps",
                    ));
                };
                let arena = Arena::attach(file.as_fd())?;
                if arena.identity() != identity {
                    return Err(ArenaError::Invalid(
                        "the file sent with a batch view is not the arena it names",
                    ));
                }
                within(&arena, slot)?;
                arena.mark_attached();
                let arena = Arc::new(arena);
                // Dead workers' arenas with no view alive go before a new one is kept.
                arenas.retain(|_, mapped| !mapped.abandoned());
                let owner = owner_pid.map(Owner::of);
                arenas.insert(
                    identity,
                    Mapped {
                        arena: Arc::clone(&arena),
                        owner,
                    },
                );
                arena
            }
        };
        Ok(SentView { arena, slot })
    }

    /// A view sent here is freed: its hold is let go, and the arena is dropped from the map
    /// when it is retired and no view sent is left alive or on its way, or when its worker is
    /// gone and this was the last view alive here.
    fn release(&self, arena: &Arc<Arena>, slot: usize) {
        let mut guard = self.lock();
        let last_sent = arena.release_sent(slot);
        let Some(arenas) = guard.as_mut() else {
            return;
        };
        let identity = arena.identity();
        let Some(mapped) = arenas.get(&identity) else {
            return;
        };
        if !Arc::ptr_eq(&mapped.arena, arena) {
            return;
        }
        // Two: the map's and this view's.
        if last_sent || (Arc::strong_count(arena) == 2 && mapped.owner_gone()) {
            arenas.remove(&identity);
        }
    }

    /// Drops the arenas no view is alive of here and none can arrive of (their worker is gone,
    /// or they are retired with none on its way); how many.
    pub fn sweep(&self) -> usize {
        let mut guard = self.lock();
        let Some(arenas) = guard.as_mut() else {
            return 0;
        };
        let before = arenas.len();
        arenas.retain(|_, mapped| !mapped.abandoned());
        before - arenas.len()
    }

    /// How many arenas are mapped here.
    pub fn len(&self) -> usize {
        self.lock().as_ref().map_or(0, HashMap::len)
    }
}

/// An error unless `slot` is one of the arena's.
fn within(arena: &Arena, slot: usize) -> Result<(), ArenaError> {
    if slot >= arena.slots() {
        return Err(ArenaError::Invalid(
            "a batch view names a slot past its arena",
        ));
    }
    Ok(())
}

/// A view the main process was sent: holds its slot until it drops.
pub struct SentView {
    arena: Arc<Arena>,
    slot: usize,
}

impl SentView {
    pub fn arena(&self) -> &Arena {
        &self.arena
    }

    pub fn slot(&self) -> usize {
        self.slot
    }
}

impl Drop for SentView {
    fn drop(&mut self) {
        attachments().release(&self.arena, self.slot);
    }
}

/// A view the worker made of a slot of its own arena: holds the slot until it drops.
pub struct HeldView {
    arena: Arc<Arena>,
    slot: usize,
}

impl HeldView {
    /// One more hold on `slot` of `arena`, let go when the view drops.
    pub fn new(arena: Arc<Arena>, slot: usize) -> HeldView {
        arena.hold(slot);
        HeldView { arena, slot }
    }
}

impl Drop for HeldView {
    fn drop(&mut self) {
        self.arena.release(self.slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn duplicate(arena: &Arena) -> OwnedFd {
        arena.file().unwrap().try_clone_to_owned().unwrap()
    }

    #[test]
    fn an_arena_is_mapped_once_and_dropped_with_its_last_sent_view() {
        let worker = Arc::new(Arena::create(2, 64).unwrap());
        let here = std::process::id() as i32;
        let slot = worker.claim(8).unwrap();
        let before = attachments().len();
        assert!(!worker.send(slot));
        let first = attachments()
            .receive(
                worker.identity(),
                Some(duplicate(&worker)),
                Some(here),
                slot,
            )
            .unwrap();
        assert!(worker.send(slot)); // mapped there now
        let second = attachments()
            .receive(worker.identity(), None, None, slot)
            .unwrap();
        assert_eq!(attachments().len(), before + 1);
        assert_eq!(worker.holds_on(slot), 3); // the claim and two sent views
        drop(first);
        drop(second);
        // The worker may still write there: kept mapped.
        assert_eq!(attachments().len(), before + 1);
        assert!(worker.send(slot));
        let third = attachments()
            .receive(worker.identity(), None, None, slot)
            .unwrap();
        worker.retire();
        drop(third);
        assert_eq!(attachments().len(), before);
        assert_eq!(worker.holds_on(slot), 1);
        // Not mapped any more: a view without the file is refused.
        assert!(!worker.send(slot));
        assert!(attachments()
            .receive(worker.identity(), None, None, slot)
            .is_err());
    }

    #[test]
    fn a_file_of_another_arena_is_refused() {
        let one = Arena::create(1, 64).unwrap();
        let other = Arena::create(1, 64).unwrap();
        let received = attachments().receive(one.identity(), Some(duplicate(&other)), None, 0);
        assert!(received.is_err());
        let past = attachments().receive(one.identity(), Some(duplicate(&one)), None, 5);
        assert!(past.is_err());
    }

    #[test]
    fn a_worker_view_holds_its_slot() {
        let arena = Arc::new(Arena::create(1, 64).unwrap());
        let slot = arena.claim(8).unwrap();
        let view = HeldView::new(Arc::clone(&arena), slot);
        arena.release(slot);
        assert_eq!(arena.claim(8), None);
        drop(view);
        assert_eq!(arena.claim(8), Some(slot));
    }
}
