//! Shared-memory arenas for DataLoader workers (`core::shared_arena`): the worker's arena as a
//! Python object, and the main process's receiving side. Views leave as uint8 numpy arrays
//! whose base holds the slot (`output::numpy_arrays::leased_bytes`); torch wraps them
//! without a copy (`fastcollate._internal.worker_arena`).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

use crate::core::arena_attachments::{attachments, HeldView};
use crate::core::shared_arena::{Arena, ArenaError};
use crate::py::output::numpy_arrays::leased_array;

fn arena_error(error: ArenaError) -> PyErr {
    match error {
        ArenaError::System { .. } => PyOSError::new_err(error.to_string()),
        ArenaError::Invalid(_) => PyValueError::new_err(error.to_string()),
    }
}

/// A worker's arena: `slots` slots of `slot_bytes` bytes (a multiple of 64) in one new
/// anonymous shared file.
#[pyclass(name = "WorkerArena", module = "fastcollate._native", frozen)]
pub struct PyWorkerArena {
    arena: Arc<Arena>,
}

#[pymethods]
impl PyWorkerArena {
    #[new]
    fn new(slots: usize, slot_bytes: usize) -> PyResult<Self> {
        let arena = Arena::create(slots, slot_bytes).map_err(arena_error)?;
        Ok(PyWorkerArena {
            arena: Arc::new(arena),
        })
    }

    #[getter]
    fn slots(&self) -> usize {
        self.arena.slots()
    }

    #[getter]
    fn slot_bytes(&self) -> usize {
        self.arena.slot_bytes()
    }

    /// The file's (device, inode), which names the arena in both processes.
    #[getter]
    fn identity(&self) -> (u64, u64) {
        self.arena.identity()
    }

    /// The arena's file descriptor (to send; the arena keeps it open).
    fn fileno(&self) -> PyResult<i32> {
        self.arena
            .file()
            .map(|fd| fd.as_raw_fd())
            .ok_or_else(|| PyValueError::new_err("a received arena has no file of its own"))
    }

    /// A free slot of at least `nbytes` bytes, held until `release`; None when every slot is
    /// held or the slots are smaller.
    fn claim(&self, nbytes: usize) -> Option<usize> {
        self.arena.claim(nbytes)
    }

    /// Lets go of one hold on `slot` (the claim).
    fn release(&self, slot: usize) -> PyResult<()> {
        self.check(slot)?;
        self.arena.release(slot);
        Ok(())
    }

    /// The `nbytes` bytes at `offset` of `slot` as a writable array: of numpy's type number
    /// `typenum` and `shape` (C order), or uint8 bytes when `typenum` is None; the slot stays
    /// held while the array (or any view of it) lives.
    #[pyo3(signature = (slot, offset, nbytes, typenum=None, shape=Vec::new()))]
    fn view<'py>(
        &self,
        py: Python<'py>,
        slot: usize,
        offset: usize,
        nbytes: usize,
        typenum: Option<i32>,
        shape: Vec<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let data = self
            .arena
            .span(slot, offset, nbytes)
            .ok_or_else(|| PyValueError::new_err("a view past its slot"))?;
        let held = HeldView::new(Arc::clone(&self.arena), slot);
        // SAFETY: the bytes lie in the slot (span), which `held` keeps claimed, so the worker
        // does not hand it out again, and keeps the mapping alive.
        unsafe { leased_array(py, data, nbytes, typenum, &shape, held) }
    }

    /// The slot and offset of the `nbytes` bytes at `address` when they lie in one slot.
    fn locate(&self, address: usize, nbytes: usize) -> Option<(usize, usize)> {
        self.arena.locate(address, nbytes)
    }

    /// A view of `slot` is sent to the main process: held for it until it is freed there.
    /// True when the main process maps the arena (the view goes without the file).
    fn send(&self, slot: usize) -> PyResult<bool> {
        self.check(slot)?;
        Ok(self.arena.send(slot))
    }

    /// The worker writes no new batch into this arena (it made a larger one): the main
    /// process drops its mapping once no view it was sent is alive.
    fn retire(&self) {
        self.arena.retire();
    }

    /// Holds on `slot` (tests).
    fn holds(&self, slot: usize) -> PyResult<u32> {
        self.check(slot)?;
        Ok(self.arena.holds_on(slot))
    }
}

impl PyWorkerArena {
    fn check(&self, slot: usize) -> PyResult<()> {
        if slot >= self.arena.slots() {
            return Err(PyValueError::new_err(format!(
                "slot {slot} of an arena of {} slots",
                self.arena.slots()
            )));
        }
        Ok(())
    }
}

/// A view a worker sent arrives in the main process: the `nbytes` bytes at `offset` of
/// `slot` of the arena `identity`, as a writable array (of numpy's type number `typenum` and
/// `shape`, or uint8 bytes when `typenum` is None) holding the slot while it lives. `fd` is
/// the arena's file when the worker sent it (this call takes it and closes it), else -1;
/// `owner_pid` the worker's pid.
#[pyfunction]
#[pyo3(signature = (identity, fd, owner_pid, slot, offset, nbytes, typenum=None, shape=Vec::new()))]
#[allow(clippy::too_many_arguments)]
pub fn receive_arena_view<'py>(
    py: Python<'py>,
    identity: (u64, u64),
    fd: i32,
    owner_pid: i32,
    slot: usize,
    offset: usize,
    nbytes: usize,
    typenum: Option<i32>,
    shape: Vec<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: the caller hands the descriptor over (it came detached from the worker's
    // `DupFd`); it is this call's to close.
    let file = (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) });
    let owner = (owner_pid > 0).then_some(owner_pid);
    let view = attachments()
        .receive(identity, file, owner, slot)
        .map_err(arena_error)?;
    let data = view
        .arena()
        .span(view.slot(), offset, nbytes)
        .ok_or_else(|| PyValueError::new_err("a batch view past its slot"))?;
    // SAFETY: the bytes lie in the slot, which `view` holds (the worker does not claim it
    // again until the view drops), and `view` keeps the mapping alive.
    unsafe { leased_array(py, data, nbytes, typenum, &shape, view) }
}

/// How many workers' arenas this process maps.
#[pyfunction]
pub fn mapped_arenas() -> usize {
    attachments().len()
}

/// Drops the arenas of workers that are gone, with no view alive here; how many.
#[pyfunction]
pub fn sweep_arenas() -> usize {
    attachments().sweep()
}
