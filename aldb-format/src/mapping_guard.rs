//! Surviving a snapshot file that shrinks while it is mapped.
//!
//! Published files are immutable by contract, but an operator's copy or backup tool can truncate
//! one in place. Reading a mapped page that now lies wholly past the end of its file raises
//! `SIGBUS`, whose default action kills the process: Hyades, or the validator that hosts the
//! writer. Reading through the mapping is what makes proofs fast (a proof is a few dozen
//! scattered reads of a few bytes each; `pread` would make each one a system call), so the
//! mapping stays and the fault is made survivable, as the JVM does for mapped buffers:
//!
//! - One process-wide `SIGBUS` handler (`SA_SIGINFO`), installed on the first registration.
//!   For a fault (`BUS_ADRERR`) at an address inside a registered mapping it maps a private
//!   zero page over the faulting page (`MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS`), sets that
//!   mapping's damaged flag and returns: the faulting read completes and reads zeros. Any
//!   other `SIGBUS` (another mapping, a sent signal, a machine-check error) goes to the handler
//!   that was installed before, or gets the default action (death by `SIGBUS`), so real bugs
//!   still kill.
//! - Zeros never reach an answer: every read path calls [`crate::store::MappedFile::intact`]
//!   after it has read (copied or hashed) what it needs, which fails with
//!   [`crate::SnapshotError::Corrupt`] naming the file when the flag is set. The same call also
//!   reads the file's last bytes (its end magic), which catches the one truncation a fault does
//!   not: the page that holds the new end stays mapped and reads zeros past it without faulting,
//!   but the end magic then lies past the end too, so reading it either faults (setting the flag)
//!   or reads zeros (not the magic). Either way the check that follows the read fails.
//! - The registry the handler consults is lock-free and allocation-free on the handler's side:
//!   slots of atomics (start, length, damaged flag, and a state word that works as a sequence
//!   lock), in segments of [`SEGMENT_SLOTS`] allocated on demand (outside the handler) and never
//!   freed. The handler scans the allocated segments; faults are rare, so a scan is fine.
//! - A mapping is registered before its first read and unregistered before it is unmapped
//!   (the guard is dropped before the map). At most [`CAPACITY`] mappings are registered at
//!   once (2^20, well above the kernel's default `vm.max_map_count` of 65,530 and as high as
//!   the 1,000,000 validators are told to set); past that, opening a file fails with a clear
//!   error rather than serving it unguarded.
//!
//! The handler is process-wide: a library or host that installs its own `SIGBUS` handler after
//! ours without chaining replaces it, and a truncated file kills again. Ours chains to whatever
//! was installed before it (Rust's runtime installs one for stack overflows).
//!
//! What this does not cover: a file rewritten in place to the same length with different bytes
//! (nothing faults; the header's root and the proof's hashes no longer agree, which a verifying
//! client sees), and a file truncated and grown back between a read and its check. If the kernel
//! cannot map the zero page (no memory, or `vm.max_map_count` reached: the zero page splits the
//! mapping) the fault falls through to the default action. Only Linux installs the handler; on
//! other targets registration is a no-op, a read that faults still kills, and only the end-magic
//! check applies.

use std::sync::atomic::AtomicBool;
#[cfg(target_os = "linux")]
use std::sync::atomic::Ordering;

/// Slots per registry segment.
pub(crate) const SEGMENT_SLOTS: usize = 4096;
/// Segments the registry can grow to.
const SEGMENTS: usize = 256;
/// The most mappings registered at once.
pub(crate) const CAPACITY: usize = SEGMENT_SLOTS * SEGMENTS;

/// A registered mapping; unregisters it when dropped.
#[derive(Debug)]
pub(crate) struct Registration {
    #[cfg(target_os = "linux")]
    slot: Option<(usize, &'static imp::Slot)>,
    /// Set when a check finds the end magic gone without a fault (or without a slot).
    seen: AtomicBool,
}

impl Registration {
    /// Whether a read of this mapping faulted past the end of its file, or a check found the
    /// file shorter than when it was mapped. Once set, it stays set.
    pub(crate) fn damaged(&self) -> bool {
        #[cfg(target_os = "linux")]
        if let Some((_, s)) = self.slot
            && s.damaged.load(Ordering::Acquire)
        {
            return true;
        }
        self.seen.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Records damage found by a check rather than by the fault handler.
    pub(crate) fn mark_damaged(&self) {
        self.seen.store(true, std::sync::atomic::Ordering::Release);
    }
}

/// Registers the mapping `[start, start + len)`, installing the handler on first use.
/// Fails only when [`CAPACITY`] mappings are registered already.
pub(crate) fn register(start: *const u8, len: usize) -> Result<Registration, std::io::Error> {
    #[cfg(target_os = "linux")]
    {
        if len == 0 {
            return Ok(Registration { slot: None, seen: AtomicBool::new(false) });
        }
        let slot = imp::register(start as usize, len)
            .ok_or_else(|| std::io::Error::other(format!("more than {CAPACITY} snapshot files are mapped at once")))?;
        Ok(Registration { slot: Some(slot), seen: AtomicBool::new(false) })
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (start, len);
        Ok(Registration { seen: AtomicBool::new(false) })
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        if let Some((index, slot)) = self.slot.take() {
            imp::unregister(index, slot);
        }
    }
}

/// Zero pages the handler has mapped over faulting pages since the process started.
#[cfg(test)]
pub(crate) fn patched_pages() -> u64 {
    #[cfg(target_os = "linux")]
    {
        imp::PATCHED.load(Ordering::Relaxed)
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

#[cfg(target_os = "linux")]
mod imp {
    use std::ffi::c_void;
    use std::ptr;
    use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering, fence};
    use std::sync::{Once, OnceLock};

    use libc::c_int;

    use super::{SEGMENT_SLOTS, SEGMENTS};

    /// A slot's state word: the low two bits say free, claimed (being filled) or live; the rest
    /// count claims, so a slot freed and claimed again never looks unchanged to the handler.
    const FREE: usize = 0;
    const BUSY: usize = 1;
    const LIVE: usize = 2;
    const STATE: usize = 3;

    #[derive(Debug)]
    pub(super) struct Slot {
        state: AtomicUsize,
        start: AtomicUsize,
        len: AtomicUsize,
        pub(super) damaged: AtomicBool,
    }

    impl Slot {
        fn new() -> Self {
            Self {
                state: AtomicUsize::new(FREE),
                start: AtomicUsize::new(0),
                len: AtomicUsize::new(0),
                damaged: AtomicBool::new(false),
            }
        }

        /// Whether the slot is live and covers `addr`. Reads the range under the sequence lock:
        /// a slot rewritten while it was read is treated as not covering anything. Async-signal-safe.
        fn covers(&self, addr: usize) -> bool {
            let st = self.state.load(Ordering::Acquire);
            if st & STATE != LIVE {
                return false;
            }
            let start = self.start.load(Ordering::Relaxed);
            let len = self.len.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            self.state.load(Ordering::Relaxed) == st && addr.wrapping_sub(start) < len
        }

        fn try_claim(&self) -> bool {
            let st = self.state.load(Ordering::Relaxed);
            st & STATE == FREE
                && self
                    .state
                    .compare_exchange(st, (st & !STATE).wrapping_add(4) | BUSY, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
        }
    }

    /// Each segment is `SEGMENT_SLOTS` slots, allocated once and never freed, so the handler can
    /// follow these pointers at any time. Segments are allocated in order: the first null ends
    /// the list.
    static SEGMENT: [AtomicPtr<Slot>; SEGMENTS] = [const { AtomicPtr::new(ptr::null_mut()) }; SEGMENTS];
    /// Where the next claim starts looking: just past the last claim, or at the last release.
    static HINT: AtomicUsize = AtomicUsize::new(0);
    static PAGE: AtomicUsize = AtomicUsize::new(4096);
    pub(super) static PATCHED: AtomicU64 = AtomicU64::new(0);
    static INSTALL: Once = Once::new();
    /// The `SIGBUS` action that was in place before ours, for faults that are not ours.
    static PREV: OnceLock<libc::sigaction> = OnceLock::new();

    fn segment(i: usize) -> Option<&'static [Slot]> {
        let p = SEGMENT.get(i)?.load(Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        // SAFETY: a non-null pointer was stored by `grow` from a leaked boxed slice of exactly
        // SEGMENT_SLOTS slots, which lives for the rest of the process.
        Some(unsafe { std::slice::from_raw_parts(p, SEGMENT_SLOTS) })
    }

    /// Allocates segment `i` unless another thread already has; `false` when `i` is past the
    /// last segment.
    fn grow(i: usize) -> bool {
        let Some(cell) = SEGMENT.get(i) else { return false };
        if cell.load(Ordering::Acquire).is_null() {
            let fresh: Box<[Slot]> = (0..SEGMENT_SLOTS).map(|_| Slot::new()).collect();
            let p = Box::into_raw(fresh).cast::<Slot>();
            if cell.compare_exchange(ptr::null_mut(), p, Ordering::AcqRel, Ordering::Acquire).is_err() {
                // SAFETY: `p` came from `Box::into_raw` of a SEGMENT_SLOTS-long boxed slice just
                // above and was never published, so this is its only owner.
                drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(p, SEGMENT_SLOTS)) });
            }
        }
        true
    }

    pub(super) fn register(start: usize, len: usize) -> Option<(usize, &'static Slot)> {
        install();
        let (index, slot) = claim()?;
        slot.start.store(start, Ordering::Relaxed);
        slot.len.store(len, Ordering::Relaxed);
        slot.damaged.store(false, Ordering::Relaxed);
        let st = slot.state.load(Ordering::Relaxed);
        slot.state.store((st & !STATE) | LIVE, Ordering::Release);
        Some((index, slot))
    }

    fn claim() -> Option<(usize, &'static Slot)> {
        let mut segments = 0;
        while segment(segments).is_some() {
            segments += 1;
        }
        let total = segments * SEGMENT_SLOTS;
        if total > 0 {
            let from = HINT.load(Ordering::Relaxed) % total;
            for k in 0..total {
                let i = (from + k) % total;
                let slot = &segment(i / SEGMENT_SLOTS)?[i % SEGMENT_SLOTS];
                if slot.try_claim() {
                    HINT.store(i + 1, Ordering::Relaxed);
                    return Some((i, slot));
                }
            }
        }
        // Every allocated slot is taken: claim in the next segments, allocating them.
        for s in segments..SEGMENTS {
            if !grow(s) {
                break;
            }
            let seg = segment(s)?;
            if let Some(j) = seg.iter().position(Slot::try_claim) {
                let i = s * SEGMENT_SLOTS + j;
                HINT.store(i + 1, Ordering::Relaxed);
                return Some((i, &seg[j]));
            }
        }
        None
    }

    pub(super) fn unregister(index: usize, slot: &Slot) {
        let st = slot.state.load(Ordering::Relaxed);
        slot.state.store(st & !STATE, Ordering::Release);
        HINT.store(index, Ordering::Relaxed);
    }

    /// The live slot covering `addr`, if any. Async-signal-safe: atomic loads only.
    fn find(addr: usize) -> Option<&'static Slot> {
        let mut s = 0;
        while let Some(seg) = segment(s) {
            if let Some(slot) = seg.iter().find(|slot| slot.covers(addr)) {
                return Some(slot);
            }
            s += 1;
        }
        None
    }

    fn install() {
        INSTALL.call_once(|| {
            // SAFETY: sysconf has no preconditions.
            let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            if let Ok(page) = usize::try_from(page)
                && page.is_power_of_two()
            {
                PAGE.store(page, Ordering::Relaxed);
            }
            // SAFETY: an all-zero sigaction is a valid value (SIG_DFL, empty mask, no flags).
            let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: querying the current action into a valid struct; no action is changed.
            if unsafe { libc::sigaction(libc::SIGBUS, ptr::null(), &mut old) } != 0 {
                log::error!(
                    "cannot read the SIGBUS action: {}; a truncated snapshot file will kill the process",
                    std::io::Error::last_os_error()
                );
                return;
            }
            // Stored before ours is installed, so the handler always finds it.
            let _ = PREV.set(old);
            // SAFETY: as above, all-zero is valid; every field that matters is set below.
            let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
            act.sa_sigaction = on_sigbus as extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) as usize;
            // On the alternate stack when there is one (std sets one up for its own SIGSEGV and
            // SIGBUS handler, which faults we do not own are passed on to).
            act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            // SAFETY: `act` is a valid action whose handler is async-signal-safe.
            if unsafe { libc::sigaction(libc::SIGBUS, &act, ptr::null_mut()) } != 0 {
                log::error!(
                    "cannot install the SIGBUS handler: {}; a truncated snapshot file will kill the process",
                    std::io::Error::last_os_error()
                );
            }
        });
    }

    /// Maps a zero page over the page of `addr` when it lies in a registered mapping.
    fn patch(addr: usize) -> bool {
        let Some(slot) = find(addr) else { return false };
        let page = PAGE.load(Ordering::Relaxed);
        // Set before the page is patched: once the read completes, its check must see it.
        slot.damaged.store(true, Ordering::Release);
        // SAFETY: the page lies inside a live mapping of a snapshot file that this process made
        // read-only; replacing it with an anonymous read-only zero page changes what the pending
        // read sees (zeros, which every read path checks for through the flag just set) and
        // nothing else. The whole range is unmapped later by the mapping's owner. mmap is a
        // plain system call, safe in a signal handler.
        let p = unsafe {
            libc::mmap(
                (addr & !(page - 1)) as *mut c_void,
                page,
                libc::PROT_READ,
                libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return false;
        }
        PATCHED.fetch_add(1, Ordering::Relaxed);
        true
    }

    extern "C" fn on_sigbus(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
        // SAFETY: errno is thread-local; the handler must leave it as it found it.
        let errno = unsafe { *libc::__errno_location() };
        let handled = !info.is_null() && {
            // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo; si_addr is meaningful
            // for the fault codes, the only ones acted on.
            let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
            code == libc::BUS_ADRERR && patch(addr)
        };
        // SAFETY: as above.
        unsafe { *libc::__errno_location() = errno };
        if !handled {
            chain(sig, info, ctx);
        }
    }

    /// Passes a `SIGBUS` that is not ours to the previous handler, or gives it the default
    /// action: ignoring a fault would re-run the faulting read forever.
    fn chain(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
        // SAFETY: a non-null info is valid (see on_sigbus).
        let sent = info.is_null() || unsafe { (*info).si_code } <= 0;
        match PREV.get().map(|p| (p.sa_sigaction, p.sa_flags)) {
            Some((libc::SIG_IGN, _)) if sent => {}
            Some((h, flags)) if h != libc::SIG_DFL && h != libc::SIG_IGN => {
                if flags & libc::SA_SIGINFO != 0 {
                    // SAFETY: the previous action was installed with SA_SIGINFO, so its handler
                    // has this signature; it gets the arguments we were given.
                    let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) = unsafe { std::mem::transmute(h) };
                    f(sig, info, ctx);
                } else {
                    // SAFETY: without SA_SIGINFO the previous handler takes the signal number.
                    let f: extern "C" fn(c_int) = unsafe { std::mem::transmute(h) };
                    f(sig);
                }
            }
            _ => {
                // SAFETY: all-zero is SIG_DFL with an empty mask.
                let dfl: libc::sigaction = unsafe { std::mem::zeroed() };
                // SAFETY: restoring the default action; async-signal-safe.
                unsafe { libc::sigaction(sig, &dfl, ptr::null_mut()) };
                // A fault re-runs the faulting read on return and dies of it, with the kernel's
                // own report; a sent signal has to be raised again (it stays pending, blocked,
                // until this handler returns).
                if sent {
                    // SAFETY: raise is async-signal-safe.
                    unsafe { libc::raise(sig) };
                }
            }
        }
    }

    #[cfg(test)]
    pub(super) fn covered(addr: usize) -> bool {
        find(addr).is_some()
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Ranges in the first 64 KiB of the address space, which Linux never maps
    /// (`vm.mmap_min_addr`), so the registry tests cannot claim a real fault of another test.
    #[test]
    fn registry_finds_live_ranges_only_and_reuses_slots() {
        let n = SEGMENT_SLOTS + 100;
        let regs: Vec<Registration> = (0..n).map(|i| register((8 * i + 8) as *const u8, 8).unwrap()).collect();
        assert!(imp::covered(8) && imp::covered(8 * n + 7), "first and last ranges, across two segments");
        assert!(!imp::covered(7) && !imp::covered(8 * n + 8));
        assert!(regs.iter().all(|r| !r.damaged()));
        let last = regs.last().unwrap();
        last.mark_damaged();
        assert!(last.damaged());
        drop(regs);
        assert!(!imp::covered(8) && !imp::covered(8 * n + 7), "dropped registrations cover nothing");
        let again = register(16 as *const u8, 8).unwrap();
        assert!(imp::covered(16) && !again.damaged(), "a reused slot starts undamaged");
    }
}
