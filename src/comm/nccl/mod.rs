//! The NCCL backend. Every use of cudarc is in this file, and nothing here calls into CUDA or
//! NCCL before probing that the library loads: cudarc (built with `dynamic-loading`) panics
//! when a library is missing, so [`driver_present`] and [`nccl_present`] come first, always.
//!
//! Only rank processes and the `__gpu-probe` helper load CUDA; the launcher never does, so a
//! broken driver can take down a child, never the app.
//!
//! Buffers follow nccl-tests: a collective of `count` elements runs on device buffers, in place
//! (`recvbuff == sendbuff`, with the rank's chunk offset for reduce-scatter and all-gather) or
//! out of place; iterations are launched back to back on one stream (the measurement loop
//! times them with the host's clock, as nccl-tests does).
//!
//! NCCL itself is called through [`api`], not cudarc's wrappers: every result is read as the
//! C `int` it is (a newer NCCL may return a code that cudarc's `ncclResult_t` enum lacks, and
//! such a value in a Rust enum is undefined behaviour), and optional entry points
//! (`ncclCommInitRankConfig`, `ncclGetLastError`, `ncclCommFinalize`) are looked up rather than
//! assumed.

pub mod find;

use std::ffi::{c_int, c_void};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use cudarc::nccl::sys as nsys;
use serde::{Deserialize, Serialize};

use crate::collective::{Collective, Dtype, Op};

/// One GPU as the driver describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gpu {
    pub ordinal: usize,
    pub name: String,
    pub memory_bytes: u64,
    /// "9.0" for an H100/H200.
    pub compute_capability: String,
}

/// What this machine offers the NCCL backend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Probe {
    /// libcuda could be loaded.
    pub driver_lib: bool,
    /// "12.8" (the CUDA version the driver supports).
    pub driver_version: Option<String>,
    pub gpus: Vec<Gpu>,
    /// (i, j, can GPU i access GPU j's memory directly: NVLink or PCIe P2P).
    pub peer_access: Vec<(usize, usize, bool)>,
    /// libnccl could be loaded.
    pub nccl_lib: bool,
    /// "2.21.5".
    pub nccl_version: Option<String>,
    /// Why NCCL was not loaded at all (no GPU to use it on, and nobody asked).
    #[serde(default)]
    pub nccl_not_loaded: Option<String>,
    /// What failed, in words.
    pub errors: Vec<String>,
}

/// Can libcuda be loaded? (Must be true before any driver call.)
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the library and closes it again.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Can libnccl be loaded? (Must be true before any NCCL call.)
pub fn nccl_present() -> bool {
    // SAFETY: only tries to dlopen the library and closes it again.
    unsafe { cudarc::nccl::sys::is_culib_present() }
}

/// NCCL's C entry points, loaded once from the library cudarc opened, each result an `int`.
pub mod api {
    use super::{NcclError, nsys};
    use std::ffi::{CStr, c_char, c_int, c_void};
    use std::sync::OnceLock;

    /// An `ncclResult_t` as the C int it is.
    pub type Code = c_int;
    pub const SUCCESS: Code = 0;
    pub const IN_PROGRESS: Code = 7;
    type Comm = nsys::ncclComm_t;
    type Stream = nsys::cudaStream_t;
    type Id = nsys::ncclUniqueId;

    /// The fields every `ncclConfig_t` since NCCL 2.14 starts with, in nccl.h's order. NCCL
    /// copies min(`size`, its own sizeof) bytes over its defaults and resets every field newer
    /// than `version`, so this struct, with `version` 2.14.0, is the same request to any
    /// release from 2.14 on (2.14-2.16 read no further; 2.17+ take their defaults for the rest).
    #[repr(C)]
    pub struct Config14 {
        size: usize,
        magic: u32,
        version: u32,
        blocking: c_int,
        /// Tail padding, zeroed: a 2.17+ NCCL would read it as cgaClusterSize were `version` newer.
        pad: c_int,
    }

    impl Config14 {
        /// ncclConfig_t's magic (NCCL_CONFIG_INITIALIZER).
        pub const MAGIC: u32 = 0xcafe_beef;
        /// NCCL_VERSION(2, 14, 0): the layout above.
        pub const VERSION: u32 = 21400;

        /// A non-blocking communicator: init returns at once (ncclInProgress) and is polled.
        pub fn nonblocking() -> Self {
            Self {
                size: std::mem::size_of::<Self>(),
                magic: Self::MAGIC,
                version: Self::VERSION,
                blocking: 0,
                pad: 0,
            }
        }
    }

    /// NCCL_CONFIG_UNDEF_INT: "NCCL picks" (nccl.h).
    pub const UNDEF_INT: c_int = c_int::MIN;

    /// `ncclConfig_t` as NVIDIA/nccl v2.28.9-1 `src/nccl.h.in:74-93` lays it out (every release
    /// since 2.14 only appended fields). NCCL copies min(`size`, its own sizeof) bytes over its
    /// defaults and resets the fields newer than `version` (`src/init.cc:1804-1848`), so 2.18 to
    /// 2.27 read the head they know and 2.28+ the whole of it.
    #[repr(C)]
    pub struct Config28 {
        pub(super) size: usize,
        pub(super) magic: u32,
        pub(super) version: u32,
        pub(super) blocking: c_int,
        pub(super) cga_cluster_size: c_int,
        pub(super) min_ctas: c_int,
        pub(super) max_ctas: c_int,
        pub(super) net_name: *const std::ffi::c_char,
        pub(super) split_share: c_int,
        pub(super) traffic_class: c_int,
        pub(super) comm_name: *const std::ffi::c_char,
        pub(super) collnet_enable: c_int,
        pub(super) cta_policy: c_int,
        pub(super) shrink_share: c_int,
        pub(super) nvls_ctas: c_int,
        pub(super) n_channels_per_net_peer: c_int,
        pub(super) nvlink_centric_sched: c_int,
    }

    impl Config28 {
        /// NCCL_VERSION(2, 28, 0).
        pub const VERSION: u32 = 22800;

        /// The communicator ringlab times on, split from the non-blocking one once its init
        /// has settled: blocking (a call returns when its work is on the stream, with no
        /// thread launched per call: H1), and
        /// NVLink-centric scheduling on, as nccl-tests v2.19.6 sets it for NCCL >= 2.28
        /// (`src/common.cu:204-205`; NCCL reads it on sm >= 100 with CUDA 13 only).
        pub fn timed() -> Self {
            Self {
                size: std::mem::size_of::<Self>(),
                magic: Config14::MAGIC,
                version: Self::VERSION,
                blocking: 1,
                cga_cluster_size: UNDEF_INT,
                min_ctas: UNDEF_INT,
                max_ctas: UNDEF_INT,
                net_name: std::ptr::null(),
                split_share: UNDEF_INT,
                traffic_class: UNDEF_INT,
                comm_name: std::ptr::null(),
                collnet_enable: UNDEF_INT,
                cta_policy: UNDEF_INT,
                shrink_share: UNDEF_INT,
                nvls_ctas: UNDEF_INT,
                n_channels_per_net_peer: UNDEF_INT,
                nvlink_centric_sched: 1,
            }
        }
    }

    type Op7 =
        unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, Comm, Stream) -> Code;

    /// NCCL's functions; the optional ones are None in releases without them. Private: each is
    /// called through its one method below.
    pub struct Api {
        get_unique_id: unsafe extern "C" fn(*mut Id) -> Code,
        comm_init_rank: unsafe extern "C" fn(*mut Comm, c_int, Id, c_int) -> Code,
        /// NCCL >= 2.14.
        comm_init_rank_config:
            Option<unsafe extern "C" fn(*mut Comm, c_int, Id, c_int, *mut Config14) -> Code>,
        comm_init_all: unsafe extern "C" fn(*mut Comm, c_int, *const c_int) -> Code,
        /// (comm, color, key, newcomm, config); NCCL >= 2.18.
        comm_split:
            Option<unsafe extern "C" fn(Comm, c_int, c_int, *mut Comm, *mut Config28) -> Code>,
        /// NCCL >= 2.14.
        comm_finalize: Option<unsafe extern "C" fn(Comm) -> Code>,
        comm_destroy: unsafe extern "C" fn(Comm) -> Code,
        comm_abort: unsafe extern "C" fn(Comm) -> Code,
        comm_get_async_error: unsafe extern "C" fn(Comm, *mut Code) -> Code,
        get_error_string: unsafe extern "C" fn(Code) -> *const c_char,
        /// NCCL >= 2.13.
        get_last_error: Option<unsafe extern "C" fn(Comm) -> *const c_char>,
        group_start: unsafe extern "C" fn() -> Code,
        group_end: unsafe extern "C" fn() -> Code,
        /// (send, recv, count, type, op, comm, stream)
        all_reduce: Op7,
        /// (send, recv, recvcount, type, op, comm, stream)
        reduce_scatter: Op7,
        /// (send, recv, count, type, root, comm, stream)
        broadcast: Op7,
        reduce: unsafe extern "C" fn(
            *const c_void,
            *mut c_void,
            usize,
            c_int,
            c_int,
            c_int,
            Comm,
            Stream,
        ) -> Code,
        all_gather:
            unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, Comm, Stream) -> Code,
        send: unsafe extern "C" fn(*const c_void, usize, c_int, c_int, Comm, Stream) -> Code,
        recv: unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, Comm, Stream) -> Code,
    }

    static API: OnceLock<Result<Api, NcclError>> = OnceLock::new();

    /// The loaded library's functions (loaded once; an error where NCCL cannot be loaded or
    /// lacks a function every supported release has).
    pub fn get() -> Result<&'static Api, NcclError> {
        API.get_or_init(load).as_ref().map_err(Clone::clone)
    }

    fn load() -> Result<Api, NcclError> {
        if !super::nccl_present() {
            return Err(NcclError::NoNccl { hint: "" });
        }
        // SAFETY: the library loads (checked above, so cudarc's culib does not panic); each
        // symbol is the C function of that name in nccl.h, with the signature of its field.
        unsafe {
            let lib = nsys::culib();
            macro_rules! need {
                ($name:literal) => {
                    *lib.get($name.as_bytes()).map_err(|e| NcclError::NoSymbol {
                        name: $name,
                        why: e.to_string(),
                    })?
                };
            }
            macro_rules! may {
                ($name:literal) => {
                    lib.get($name.as_bytes()).ok().map(|s| *s)
                };
            }
            Ok(Api {
                get_unique_id: need!("ncclGetUniqueId"),
                comm_init_rank: need!("ncclCommInitRank"),
                comm_init_rank_config: may!("ncclCommInitRankConfig"),
                comm_init_all: need!("ncclCommInitAll"),
                comm_split: may!("ncclCommSplit"),
                comm_finalize: may!("ncclCommFinalize"),
                comm_destroy: need!("ncclCommDestroy"),
                comm_abort: need!("ncclCommAbort"),
                comm_get_async_error: need!("ncclCommGetAsyncError"),
                get_error_string: need!("ncclGetErrorString"),
                get_last_error: may!("ncclGetLastError"),
                group_start: need!("ncclGroupStart"),
                group_end: need!("ncclGroupEnd"),
                all_reduce: need!("ncclAllReduce"),
                reduce_scatter: need!("ncclReduceScatter"),
                broadcast: need!("ncclBroadcast"),
                reduce: need!("ncclReduce"),
                all_gather: need!("ncclAllGather"),
                send: need!("ncclSend"),
                recv: need!("ncclRecv"),
            })
        }
    }

    /// ncclGetVersion alone (the probe's question, answered even by a library that lacks
    /// the rest of the API).
    pub fn version() -> Result<c_int, NcclError> {
        if !super::nccl_present() {
            return Err(NcclError::NoNccl { hint: "" });
        }
        let mut v: c_int = 0;
        // SAFETY: the library loads (checked); ncclGetVersion(int*) is in every release, and
        // v is a valid out pointer.
        let r = unsafe {
            let f: unsafe extern "C" fn(*mut c_int) -> Code = *nsys::culib()
                .get(b"ncclGetVersion")
                .map_err(|e| NcclError::NoSymbol {
                    name: "ncclGetVersion",
                    why: e.to_string(),
                })?;
            f(&mut v)
        };
        match r {
            SUCCESS => Ok(v),
            code => Err(NcclError::call(
                "ncclGetVersion",
                code,
                String::new(),
                String::new(),
            )),
        }
    }

    /// One collective's launch, as [`Api::launch`] hands it to NCCL: device pointers of
    /// buffers [`super::check_bufs`] has checked, counts in elements, `ty` an ncclDataType_t,
    /// `op` an ncclRedOp_t, `peer` and `root` ranks.
    pub(super) enum Launch {
        AllReduce {
            send: *const c_void,
            recv: *mut c_void,
            count: usize,
            ty: c_int,
            op: c_int,
        },
        ReduceScatter {
            send: *const c_void,
            recv: *mut c_void,
            count: usize,
            ty: c_int,
            op: c_int,
        },
        AllGather {
            send: *const c_void,
            recv: *mut c_void,
            count: usize,
            ty: c_int,
        },
        Broadcast {
            send: *const c_void,
            recv: *mut c_void,
            count: usize,
            ty: c_int,
            root: c_int,
        },
        Reduce {
            send: *const c_void,
            recv: *mut c_void,
            count: usize,
            ty: c_int,
            op: c_int,
            root: c_int,
        },
        Send {
            send: *const c_void,
            count: usize,
            ty: c_int,
            peer: c_int,
        },
        Recv {
            recv: *mut c_void,
            count: usize,
            ty: c_int,
            peer: c_int,
        },
    }

    /// Safe doors to NCCL's entry points, one each. They rest on what this file keeps true of
    /// every handle it passes: a `Comm` is one NCCL made (init, split) and has not destroyed
    /// or aborted (NcclRank's `aborted`/`closed`, and the handles taken out of it before
    /// teardown); a stream is the rank's own; device pointers address buffers checked against
    /// the call ([`super::check_bufs`]).
    impl Api {
        /// ncclGetUniqueId.
        pub(super) fn unique_id(&self) -> (Code, Id) {
            let mut id = Id { internal: [0; 128] };
            // SAFETY: id is a valid out pointer.
            let r = unsafe { (self.get_unique_id)(&mut id) };
            (r, id)
        }

        /// ncclCommInitRankConfig (NCCL >= 2.14; None before), into `comm`.
        pub(super) fn init_rank_config(
            &self,
            comm: &mut Comm,
            world: c_int,
            id: Id,
            rank: c_int,
            cfg: &mut Config14,
        ) -> Option<Code> {
            let f = self.comm_init_rank_config?;
            // SAFETY: comm and cfg are valid pointers for the call; the id came from
            // ncclGetUniqueId (NCCL checks its magic).
            Some(unsafe { f(comm, world, id, rank, cfg) })
        }

        /// ncclCommInitRank, into `comm`.
        pub(super) fn init_rank(&self, comm: &mut Comm, world: c_int, id: Id, rank: c_int) -> Code {
            // SAFETY: comm is a valid out pointer; the id came from ncclGetUniqueId.
            unsafe { (self.comm_init_rank)(comm, world, id, rank) }
        }

        /// ncclCommInitAll: one communicator per entry of `ordinals`, into `comms` (as long).
        pub(super) fn init_all(&self, comms: &mut [Comm], ordinals: &[c_int]) -> Code {
            if comms.len() != ordinals.len() {
                return 4; // ncclInvalidArgument
            }
            let n = ordinals.len() as c_int;
            // SAFETY: comms has room for n communicators; ordinals lists as many devices.
            unsafe { (self.comm_init_all)(comms.as_mut_ptr(), n, ordinals.as_ptr()) }
        }

        /// ncclCommSplit (NCCL >= 2.18; None before) of `parent`, a live and settled
        /// communicator. NCCL may store the child in `child` later, from its own thread: the
        /// caller keeps the slot until the split has settled or the parent is aborted.
        pub(super) fn split(
            &self,
            parent: Comm,
            color: c_int,
            key: c_int,
            child: &mut Comm,
            cfg: &mut Config28,
        ) -> Option<Code> {
            let f = self.comm_split?;
            // SAFETY: parent is live (see above); child and cfg are valid pointers, and the
            // child's slot outlives the split's job (the caller's promise above).
            Some(unsafe { f(parent, color, key, child, cfg) })
        }

        /// ncclCommFinalize (NCCL >= 2.14; None before) of an idle, live communicator.
        pub(super) fn finalize(&self, comm: Comm) -> Option<Code> {
            let f = self.comm_finalize?;
            // SAFETY: comm is live (see above) and idle.
            Some(unsafe { f(comm) })
        }

        /// ncclCommDestroy: after this the handle is gone (the caller drops it).
        pub(super) fn destroy(&self, comm: Comm) -> Code {
            // SAFETY: comm is live (see above), finalized and idle, destroyed once.
            unsafe { (self.comm_destroy)(comm) }
        }

        /// ncclCommAbort: NCCL allows it on a communicator whose init or split is in progress
        /// or failed (it stops and joins that job's thread). After this the handle is gone.
        pub(super) fn abort(&self, comm: Comm) -> Code {
            // SAFETY: comm is one NCCL made and not yet destroyed or aborted (see above).
            unsafe { (self.comm_abort)(comm) }
        }

        /// ncclCommGetAsyncError: (the call's own code, the communicator's state).
        pub(super) fn async_error(&self, comm: Comm) -> (Code, Code) {
            let mut state: Code = IN_PROGRESS;
            // SAFETY: comm is live (see above); state is a valid out pointer.
            let r = unsafe { (self.comm_get_async_error)(comm, &mut state) };
            (r, state)
        }

        /// ncclGetErrorString: it answers any code ("unknown result code" for one it lacks).
        pub(super) fn error_string(&self, code: Code) -> String {
            // SAFETY: a plain query; NCCL returns null or a NUL-terminated static string.
            let text = unsafe {
                let p = (self.get_error_string)(code);
                (!p.is_null()).then(|| CStr::from_ptr(p))
            };
            c_text(text)
        }

        /// ncclGetLastError where the library has it (""), for `comm` (may be null).
        pub(super) fn last_error(&self, comm: Comm) -> String {
            let Some(f) = self.get_last_error else {
                return String::new();
            };
            // SAFETY: a plain query (null or a live communicator); NCCL returns null or a
            // NUL-terminated static or thread-local string, copied (c_text) before any other
            // NCCL call on this thread.
            let text = unsafe {
                let p = f(comm);
                (!p.is_null()).then(|| CStr::from_ptr(p))
            };
            c_text(text)
        }

        /// ncclGroupStart.
        pub(super) fn group_start(&self) -> Code {
            // SAFETY: a plain group bracket on the loaded library.
            unsafe { (self.group_start)() }
        }

        /// ncclGroupEnd.
        pub(super) fn group_end(&self) -> Code {
            // SAFETY: as ncclGroupStart.
            unsafe { (self.group_end)() }
        }

        /// One collective, send or receive on `comm`'s `stream`.
        pub(super) fn launch(&self, call: Launch, comm: Comm, stream: Stream) -> Code {
            use Launch as L;
            // SAFETY: the pointers address live device buffers that hold the call (checked by
            // the caller, see above), comm is live and stream belongs to its rank's context.
            // In-place send/recv and all-to-all pass one buffer as both, as nccl-tests does.
            unsafe {
                match call {
                    L::AllReduce {
                        send,
                        recv,
                        count,
                        ty,
                        op,
                    } => (self.all_reduce)(send, recv, count, ty, op, comm, stream),
                    L::ReduceScatter {
                        send,
                        recv,
                        count,
                        ty,
                        op,
                    } => (self.reduce_scatter)(send, recv, count, ty, op, comm, stream),
                    L::AllGather {
                        send,
                        recv,
                        count,
                        ty,
                    } => (self.all_gather)(send, recv, count, ty, comm, stream),
                    L::Broadcast {
                        send,
                        recv,
                        count,
                        ty,
                        root,
                    } => (self.broadcast)(send, recv, count, ty, root, comm, stream),
                    L::Reduce {
                        send,
                        recv,
                        count,
                        ty,
                        op,
                        root,
                    } => (self.reduce)(send, recv, count, ty, op, root, comm, stream),
                    L::Send {
                        send,
                        count,
                        ty,
                        peer,
                    } => (self.send)(send, count, ty, peer, comm, stream),
                    L::Recv {
                        recv,
                        count,
                        ty,
                        peer,
                    } => (self.recv)(recv, count, ty, peer, comm, stream),
                }
            }
        }
    }

    /// A C string NCCL returned, as text ("" for none).
    fn c_text(c: Option<&CStr>) -> String {
        c.map_or_else(String::new, |c| c.to_string_lossy().trim().to_string())
    }

    /// ncclResult_t's name for a code (nccl.h), or what it is when this build does not know it.
    pub fn code_name(code: Code) -> String {
        match code {
            0 => "ncclSuccess",
            1 => "ncclUnhandledCudaError",
            2 => "ncclSystemError",
            3 => "ncclInternalError",
            4 => "ncclInvalidArgument",
            5 => "ncclInvalidUsage",
            6 => "ncclRemoteError",
            7 => "ncclInProgress",
            // ncclNumResults up to 2.29; 2.30 names it ncclTimeout.
            8 => "ncclTimeout",
            _ => "an ncclResult_t this build does not know",
        }
        .to_string()
    }
}

/// NCCL_VERSION_CODE (major*10000 + minor*100 + patch since 2.9) as "2.21.5".
pub fn version_string(code: i32) -> String {
    if code >= 10000 {
        format!("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100)
    } else {
        format!("{}.{}.{}", code / 1000, (code % 1000) / 100, code % 100)
    }
}

/// Whether a probe may load NCCL: loading a library runs its code, so without a driver and a
/// GPU to use it on NCCL is loaded only when the user asked for it (`doctor`, `--backend nccl`).
pub fn may_load_nccl(asked: bool, driver_lib: bool, gpus: usize) -> bool {
    asked || (driver_lib && gpus > 0)
}

/// Everything the driver and NCCL say about this machine; never panics on a machine without
/// them (the libraries are probed first). NCCL is loaded only as [`may_load_nccl`] allows.
pub fn probe(nccl_asked: bool) -> Probe {
    use cudarc::driver::{result as dres, sys as dsys};
    let mut p = Probe {
        driver_lib: driver_present(),
        ..Default::default()
    };
    if p.driver_lib {
        match dres::init() {
            Err(e) => p.errors.push(format!("cuInit failed: {e:?}")),
            Ok(()) => {
                let mut v: std::ffi::c_int = 0;
                // SAFETY: the driver library is loaded and initialised; v is a valid out pointer.
                if unsafe { dsys::cuDriverGetVersion(&mut v) } == dsys::CUresult::CUDA_SUCCESS {
                    p.driver_version = Some(format!("{}.{}", v / 1000, (v % 1000) / 10));
                }
                let count = dres::device::get_count().unwrap_or(0).max(0) as usize;
                let mut devs = Vec::new();
                for i in 0..count {
                    let Ok(dev) = dres::device::get(i as i32) else {
                        p.errors.push(format!("cuDeviceGet({i}) failed"));
                        continue;
                    };
                    devs.push((i, dev));
                    let name = dres::device::get_name(dev).unwrap_or_else(|_| "?".into());
                    // SAFETY: dev is a valid device handle from cuDeviceGet.
                    let mem = unsafe { dres::device::total_mem(dev) }.unwrap_or(0) as u64;
                    let attr = |a| {
                        // SAFETY: dev is valid; the attribute is a plain query.
                        unsafe { dres::device::get_attribute(dev, a) }.unwrap_or(0)
                    };
                    let cc = format!(
                        "{}.{}",
                        attr(
                            dsys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
                        ),
                        attr(
                            dsys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
                        )
                    );
                    p.gpus.push(Gpu {
                        ordinal: i,
                        name,
                        memory_bytes: mem,
                        compute_capability: cc,
                    });
                }
                for &(i, di) in &devs {
                    for &(j, dj) in &devs {
                        if i == j {
                            continue;
                        }
                        let mut can: std::ffi::c_int = 0;
                        // SAFETY: both handles are valid; can is a valid out pointer.
                        let r = unsafe { dsys::cuDeviceCanAccessPeer(&mut can, di, dj) };
                        if r == dsys::CUresult::CUDA_SUCCESS {
                            p.peer_access.push((i, j, can != 0));
                        }
                    }
                }
            }
        }
    }
    if !may_load_nccl(nccl_asked, p.driver_lib, p.gpus.len()) {
        p.nccl_not_loaded = Some(
            "not loaded: no NVIDIA driver or GPU here to run it on (`ringlab doctor` or --backend nccl loads it)"
                .into(),
        );
        return p;
    }
    p.nccl_lib = nccl_present();
    if p.nccl_lib {
        match api::version() {
            Ok(code) => {
                p.nccl_version = Some(version_string(code));
                // Every entry point a rank will call must resolve: say now, not mid-run.
                if let Err(e) = api::get() {
                    p.errors.push(e.to_string());
                }
            }
            // A failed call says its name; anything else is named here.
            Err(e @ NcclError::Call { .. }) => p.errors.push(e.to_string()),
            Err(e) => p.errors.push(format!("ncclGetVersion failed: {e}")),
        }
    }
    p
}

/// The 128 bytes of an ncclUniqueId as 256 hex digits (what rank 0 publishes in the store).
pub fn id_hex(id: &[u8; 128]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// The inverse of [`id_hex`].
pub fn id_from_hex(s: &str) -> Result<[u8; 128], NcclError> {
    let s = s.trim();
    if !s.is_ascii() {
        return Err(NcclError::IdNotAscii);
    }
    if s.len() != 256 {
        return Err(NcclError::IdLength(s.len()));
    }
    let mut out = [0u8; 128];
    for (i, o) in out.iter_mut().enumerate() {
        let digits = &s[2 * i..2 * i + 2];
        *o = u8::from_str_radix(digits, 16).map_err(|_| NcclError::IdNotHex {
            at: 2 * i,
            digits: digits.to_string(),
        })?;
    }
    Ok(out)
}

fn need_libs() -> Result<(), NcclError> {
    if !driver_present() {
        return Err(NcclError::NoDriver);
    }
    if !nccl_present() {
        return Err(NcclError::NoNccl {
            hint: ": put NCCL's folder on LD_LIBRARY_PATH (the launcher does this when it finds NCCL)",
        });
    }
    Ok(())
}

/// A new NCCL unique id (rank 0 makes it; NCCL's bootstrap root then lives in this process).
pub fn new_id() -> Result<[u8; 128], NcclError> {
    need_libs()?;
    let a = api::get()?;
    // NCCL's own reason (`no socket interface found` …) is read on failure.
    let (r, id) = a.unique_id();
    check("ncclGetUniqueId", r, std::ptr::null_mut())?;
    Ok(id.internal.map(|c| c as u8))
}

fn nccl_type(d: Dtype) -> nsys::ncclDataType_t {
    use nsys::ncclDataType_t as T;
    match d {
        Dtype::U8 => T::ncclUint8,
        Dtype::I8 => T::ncclInt8,
        Dtype::I32 => T::ncclInt32,
        Dtype::U32 => T::ncclUint32,
        Dtype::I64 => T::ncclInt64,
        Dtype::U64 => T::ncclUint64,
        Dtype::F16 => T::ncclFloat16,
        Dtype::Bf16 => T::ncclBfloat16,
        Dtype::F32 => T::ncclFloat32,
        Dtype::F64 => T::ncclFloat64,
    }
}

fn nccl_op(o: Op) -> nsys::ncclRedOp_t {
    use nsys::ncclRedOp_t as R;
    match o {
        Op::Sum => R::ncclSum,
        Op::Prod => R::ncclProd,
        Op::Max => R::ncclMax,
        Op::Min => R::ncclMin,
        Op::Avg => R::ncclAvg,
    }
}

/// Device memory owned by one rank.
pub struct DevBuf(CudaSlice<u8>);

impl DevBuf {
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.len() == 0
    }
}

/// In place (one buffer) or out of place (send, receive).
pub enum Bufs<'a> {
    InPlace(&'a mut DevBuf),
    OutOfPlace(&'a DevBuf, &'a mut DevBuf),
}

/// Why waiting for a rank's work stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitFault {
    /// NCCL or CUDA reported an error (code, NCCL's string, its last error).
    Error(String),
    /// Still running after the timeout.
    Timeout(String),
}

impl From<NcclError> for WaitFault {
    fn from(e: NcclError) -> Self {
        WaitFault::Error(e.to_string())
    }
}

/// What went wrong with NCCL or the GPU under it, with the facts of it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NcclError {
    #[error("the CUDA driver library (libcuda.so.1) cannot be loaded: no NVIDIA driver here")]
    NoDriver,
    /// `hint`: what to do about it, or "".
    #[error("libnccl.so cannot be loaded{hint}")]
    NoNccl { hint: &'static str },
    #[error("libnccl has no {name}: {why}")]
    NoSymbol { name: &'static str, why: String },
    /// An NCCL call returned `code`: NCCL's string for it and its last error (either "").
    #[error("{}", error_text(call, &api::code_name(*code), *code, text, last))]
    Call {
        call: &'static str,
        code: i32,
        text: String,
        last: String,
    },
    /// A CUDA call (through cudarc) failed: what was being done, and the driver's words.
    #[error("{what}: {detail}")]
    Cuda { what: String, detail: String },
    #[error("an NCCL unique id is hex digits; this holds other characters")]
    IdNotAscii,
    #[error("an NCCL unique id is 256 hex digits, got {0}")]
    IdLength(usize),
    #[error("not hex at digit {at}: `{digits}`")]
    IdNotHex { at: usize, digits: String },
    #[error("copy to the GPU: {len} bytes at {at} do not fit a {cap}-byte buffer")]
    UploadTooBig { len: usize, at: usize, cap: usize },
    #[error("copy from the GPU: {len} bytes asked of a {cap}-byte buffer")]
    DownloadTooBig { len: usize, cap: usize },
    #[error("{api}: {count} × {es} B overflows")]
    Overflow {
        api: &'static str,
        count: usize,
        es: usize,
    },
    #[error("{api}: {count} × {es} B needs buffers of {need} B (send {send} B, receive {recv} B)")]
    ShortBuffers {
        api: &'static str,
        count: usize,
        es: usize,
        need: usize,
        send: usize,
        recv: usize,
    },
    #[error(
        "{api}: {count} elements do not split evenly over {world} ranks (NCCL takes the same \
         count from every rank): use a multiple of {world}"
    )]
    Uneven {
        api: &'static str,
        count: usize,
        world: usize,
    },
    #[error("{api}: root {root} is not a rank of {world}")]
    NoSuchRoot {
        api: &'static str,
        root: usize,
        world: usize,
    },
    #[error("{api}: a shift of {shift} B is not a whole number of {es}-byte elements")]
    Shift {
        api: &'static str,
        shift: usize,
        es: usize,
    },
    /// A wait, settle or teardown step that gave up (its words).
    #[error("{0}")]
    Gave(String),
    #[error("{source}; aborted instead")]
    Aborted { source: Box<NcclError> },
    /// What failed, on which rank.
    #[error("rank {rank}: {source}")]
    OnRank { rank: usize, source: Box<NcclError> },
}

impl NcclError {
    /// A failed call, in NCCL's words.
    pub fn call(call: &'static str, code: i32, text: String, last: String) -> Self {
        NcclError::Call {
            call,
            code,
            text,
            last,
        }
    }
}

impl From<WaitFault> for NcclError {
    fn from(w: WaitFault) -> Self {
        match w {
            WaitFault::Error(m) | WaitFault::Timeout(m) => NcclError::Gave(m),
        }
    }
}

/// One rank's NCCL communicator, on one GPU.
pub struct NcclRank {
    /// The GPU's context: held for the life of the communicator, bound before each wait.
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    comm: nsys::ncclComm_t,
    rank: usize,
    world: usize,
    /// ncclCommAbort ran: the communicator is gone and must not be destroyed.
    aborted: bool,
    /// The non-blocking communicator `comm` was split from ([`split_blocking`]): kept for the
    /// life of the child, destroyed or aborted after it.
    parent: Option<nsys::ncclComm_t>,
    /// [`NcclRank::close`] ran: nothing is left to tear down.
    closed: bool,
    /// The one communicator (and its parent) of this process ([`NcclRank::init`]): finalized
    /// before it is destroyed. ncclCommInitAll's, driven together from one thread, are only
    /// destroyed one by one, as nccl-tests does (a finalize of one alone could wait on the
    /// others).
    alone: bool,
    /// How long such a settle, or the init, may take before it counts as a hang.
    allowance: Duration,
    /// Progress marks: an event recorded after every so many launched bytes or calls, so a
    /// long wait can tell a slow run (marks completing) from a stuck one (none completing).
    marks: std::collections::VecDeque<cudarc::driver::CudaEvent>,
    since_mark: (usize, usize),
}

/// A progress mark is recorded after this many bytes or calls enqueued.
const MARK_BYTES: usize = 64 << 20;
const MARK_CALLS: usize = 256;

fn derr<E: std::fmt::Debug>(what: &str) -> impl FnOnce(E) -> NcclError + '_ {
    move |e| NcclError::Cuda {
        what: what.to_string(),
        detail: format!("{e:?}"),
    }
}

/// An NCCL failure in NCCL's own words: the ncclResult_t name and number, ncclGetErrorString,
/// and ncclGetLastError (the reason NCCL logged last; `comm` may be null). cudarc's own error
/// prints only "NcclError".
fn describe(what: &'static str, code: api::Code, comm: nsys::ncclComm_t) -> NcclError {
    match api::get() {
        Ok(a) => NcclError::call(what, code, a.error_string(code), a.last_error(comm)),
        Err(e) => NcclError::call(what, code, e.to_string(), String::new()),
    }
}

/// Ok for ncclSuccess, else the failure in NCCL's words.
fn check(what: &'static str, code: api::Code, comm: nsys::ncclComm_t) -> Result<(), NcclError> {
    if code == api::SUCCESS {
        Ok(())
    } else {
        Err(describe(what, code, comm))
    }
}

/// The message for a failed NCCL call, from its parts.
pub fn error_text(what: &str, name: &str, code: i32, text: &str, last: &str) -> String {
    let mut s = format!("{what} failed: {name} ({code})");
    if !text.is_empty() {
        s.push_str(&format!(": {text}"));
    }
    if !last.is_empty() && last != text {
        s.push_str(&format!("; NCCL's last error: {last}"));
    }
    s
}

/// Poll a non-blocking communicator until it leaves ncclInProgress (NCCL's rule: no other call
/// on it before then). Err(Timeout) after `allowance`, Err(Error) on an error; either way the
/// caller aborts it.
fn settle(
    a: &api::Api,
    comm: nsys::ncclComm_t,
    what: &'static str,
    allowance: Duration,
) -> Result<(), WaitFault> {
    let t0 = Instant::now();
    loop {
        let (r, state) = a.async_error(comm);
        if r != api::SUCCESS {
            return Err(describe("ncclCommGetAsyncError", r, comm).into());
        }
        match state {
            api::SUCCESS => return Ok(()),
            api::IN_PROGRESS => {}
            e => return Err(describe(what, e, comm).into()),
        }
        if t0.elapsed() > allowance {
            // NCCL's last word on where it stands.
            let last = a.last_error(comm);
            return Err(WaitFault::Timeout(format!(
                "{what} still in progress after {} s{}",
                allowance.as_secs(),
                if last.is_empty() {
                    String::new()
                } else {
                    format!(" (NCCL's last error: {last})")
                }
            )));
        }
        pause(t0.elapsed());
    }
}

/// How a poll loop waits between polls of NCCL: spin (yielding) for the first 2 ms, where a
/// collective's launch on a non-blocking communicator settles (tens of µs: a sleep there
/// would cost every call a millisecond, H1), then sleep with a backoff up to 1 ms for what
/// takes longer (an init, a connect).
fn pause(waited: Duration) {
    if waited < Duration::from_millis(2) {
        std::thread::yield_now();
    } else {
        let us = (waited.as_micros() / 20).clamp(50, 1000) as u64;
        std::thread::sleep(Duration::from_micros(us));
    }
}

/// What `NCCL_COMM_BLOCKING` in the environment makes of every communicator's `blocking`
/// (NVIDIA/nccl v2.28.9-1 `src/init.cc:1647-1649`, envConfigOverride: 0 or 1 wins over the
/// config, anything else is ignored; NCCL_PARAM reads it with strtoll, base 0).
pub fn env_blocking(value: Option<&str>) -> Option<bool> {
    let v = value?.trim();
    let n = if let Some(h) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        i64::from_str_radix(h, 16).ok()?
    } else {
        v.parse::<i64>().ok()?
    };
    match n {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

/// The communicator to time on (H1). From NCCL 2.23 every call on a non-blocking communicator
/// launches its work on a new thread and returns ncclInProgress (NVIDIA/nccl v2.28.9-1
/// `src/include/group.h:123` takes the group's mode from the communicator, `src/group.cc:706-738`
/// creates the thread), so timing there would time a thread launch and a poll per call; PyTorch
/// and nccl-tests time on blocking communicators. So once the non-blocking init (kept: it is
/// what lets a rank abort a stuck init itself) has settled, every rank splits it into a
/// blocking child of the same ranks (color 0, key = rank). The two do not share resources
/// (NCCL takes that from the parent's `splitShare`, `src/init.cc` ncclCommInitChildComm, and
/// the parent's 2.14 config leaves it off): the parent never runs a collective, and from 2.22
/// connections and their buffers are made at a communicator's first collective, so it holds
/// little. The split runs under the parent's mode (its job is queued on the parent,
/// `src/group.cc:28-60`), so it is polled and abortable like the init; NCCL stores the child
/// in `*child` from its job thread (`src/init.cc:1611-1615`), so the caller's slot must
/// outlive the job: on an error the caller aborts the parent (which joins the job) before it
/// lets go of `child`. False where there is nothing to split: NCCL < 2.18 (no
/// ncclCommSplit), or `NCCL_COMM_BLOCKING=1` already made the parent blocking.
/// `NCCL_COMM_BLOCKING=0` makes the child non-blocking too (envConfigOverride); calls are then
/// settled one by one, as asked.
fn split_blocking(
    a: &api::Api,
    parent: nsys::ncclComm_t,
    rank: usize,
    allowance: Duration,
    child: &mut nsys::ncclComm_t,
) -> Result<bool, WaitFault> {
    let env = std::env::var("NCCL_COMM_BLOCKING").ok();
    if env_blocking(env.as_deref()) == Some(true) {
        return Ok(false);
    }
    let mut cfg = api::Config28::timed();
    // `child` outlives the split's job (see above).
    let Some(r) = a.split(parent, 0, rank as c_int, child, &mut cfg) else {
        return Ok(false);
    };
    if !matches!(r, api::SUCCESS | api::IN_PROGRESS) {
        return Err(describe("ncclCommSplit", r, parent).into());
    }
    // NCCL stores the child only when the split is done (ncclCommInitRankFunc).
    settle(a, parent, "ncclCommSplit", allowance)?;
    if child.is_null() {
        return Err(WaitFault::Error(
            "ncclCommSplit settled without a communicator".into(),
        ));
    }
    Ok(true)
}

/// GPU `device`'s context and the one stream that orders all of its rank's work.
fn open_gpu(device: usize) -> Result<(Arc<CudaContext>, Arc<CudaStream>), NcclError> {
    let ctx = CudaContext::new(device).map_err(derr(&format!("opening GPU {device}")))?;
    // One stream orders everything; cudarc's per-buffer event tracking would only add work.
    // SAFETY: all work of this rank goes to `stream`, so no cross-stream tracking is needed.
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream().map_err(derr("creating a stream"))?;
    Ok((ctx, stream))
}

/// Join the communicator `uid` as `rank` of `world`: the communicator to time on, and the
/// parent it was split from ([`split_blocking`]), if it was.
///
/// Where NCCL has ncclCommInitRankConfig (2.14+) the communicator is made non-blocking and
/// its init polled: an init still running after `allowance` is aborted by this rank, with
/// NCCL's last error in hand. Older releases block in ncclCommInitRank.
fn join(
    a: &api::Api,
    uid: nsys::ncclUniqueId,
    rank: usize,
    world: usize,
    allowance: Duration,
) -> Result<(nsys::ncclComm_t, Option<nsys::ncclComm_t>), WaitFault> {
    let mut comm: nsys::ncclComm_t = std::ptr::null_mut();
    // NCCL writes the split's child here from its own thread: it lives until every path
    // below is done with the split (an error aborts the parent, joining that thread, first).
    let mut child: nsys::ncclComm_t = std::ptr::null_mut();
    let (world, me) = (world as c_int, rank as c_int);
    let what = "ncclCommInitRankConfig";
    let mut cfg = api::Config14::nonblocking();
    let Some(r) = a.init_rank_config(&mut comm, world, uid, me, &mut cfg) else {
        let r = a.init_rank(&mut comm, world, uid, me);
        check("ncclCommInitRank", r, std::ptr::null_mut())?;
        return Ok((comm, None));
    };
    let done = match r {
        api::SUCCESS | api::IN_PROGRESS if !comm.is_null() => settle(a, comm, what, allowance)
            .and_then(|()| split_blocking(a, comm, rank, allowance, &mut child)),
        _ => Err(describe(what, r, comm).into()),
    };
    match done {
        Ok(true) => Ok((child, Some(comm))),
        Ok(false) => Ok((comm, None)),
        Err(e) => {
            // An abort stops and joins the init's (or split's) job, which has then written
            // `child` if it was going to; each is aborted once.
            for c in [comm, child].into_iter().filter(|c| !c.is_null()) {
                a.abort(c);
            }
            Err(match e {
                WaitFault::Timeout(m) => WaitFault::Timeout(format!(
                    "rank {rank}: {m}; aborted the communicator (a peer that never \
                     joined, or a bootstrap that cannot reach the root?)"
                )),
                other => other,
            })
        }
    }
}

/// Where one enqueue's calls go: the communicator, stream, element type, reduction and root,
/// and `at(base, elems)`, the device address `elems` elements (past the shift) into a buffer.
struct Site<'a, At: Fn(u64, usize) -> *mut c_void> {
    a: &'a api::Api,
    comm: nsys::ncclComm_t,
    stream: nsys::cudaStream_t,
    ty: c_int,
    op: c_int,
    root: c_int,
    at: At,
}

impl<At: Fn(u64, usize) -> *mut c_void> Site<'_, At> {
    /// Launch `coll` of `count` elements for `rank` of `world` on the buffers at `bufs`
    /// (send, receive; checked by [`check_bufs`]): the first failing code, or ncclSuccess.
    fn launch(
        &self,
        coll: Collective,
        count: usize,
        rank: usize,
        world: usize,
        bufs: (u64, u64),
    ) -> api::Code {
        use api::Launch as L;
        let (send, recv) = bufs;
        let (ty, op, root, at) = (self.ty, self.op, self.root, &self.at);
        // This rank's chunk, as the schedules and the checker define it: reduce-scatter leaves
        // its result there, all-gather takes its contribution from there (nccl-tests' in-place
        // layout).
        let mine = crate::collective::chunk_range(count, world, rank);
        match coll {
            Collective::AllReduce => self.run(L::AllReduce {
                send: at(send, 0),
                recv: at(recv, 0),
                count,
                ty,
                op,
            }),
            Collective::ReduceScatter => self.run(L::ReduceScatter {
                send: at(send, 0),
                recv: at(recv, mine.start),
                count: mine.len(),
                ty,
                op,
            }),
            Collective::AllGather => self.run(L::AllGather {
                send: at(send, mine.start),
                recv: at(recv, 0),
                count: mine.len(),
                ty,
            }),
            Collective::Broadcast => self.run(L::Broadcast {
                send: at(send, 0),
                recv: at(recv, 0),
                count,
                ty,
                root,
            }),
            Collective::Reduce => self.run(L::Reduce {
                send: at(send, 0),
                recv: at(recv, 0),
                count,
                ty,
                op,
                root,
            }),
            // nccl-tests' send/recv form (src/alltoall.cu): block p goes to rank p, rank p's
            // block for us lands in block p.
            Collective::AllToAll => {
                let b = count / world.max(1);
                self.grouped((0..world).map(|p| (p * b, p * b, b, p, p)), bufs)
            }
            Collective::SendRecv => {
                let to = (rank + 1) % world;
                let from = (rank + world - 1) % world;
                self.grouped(std::iter::once((0, 0, count, to, from)), bufs)
            }
        }
    }

    fn run(&self, call: api::Launch) -> api::Code {
        self.a.launch(call, self.comm, self.stream)
    }

    /// Sends and receives in one group, each (send at, receive at, count, to, from) in
    /// elements: the first failing code of the run, the group always closed.
    fn grouped(
        &self,
        pairs: impl Iterator<Item = (usize, usize, usize, usize, usize)>,
        (send, recv): (u64, u64),
    ) -> api::Code {
        use api::Launch as L;
        let start = self.a.group_start();
        if start != api::SUCCESS {
            return start;
        }
        let mut r = api::SUCCESS;
        for (s_at, r_at, count, to, from) in pairs {
            let ty = self.ty;
            r = self.run(L::Send {
                send: (self.at)(send, s_at),
                count,
                ty,
                peer: to as c_int,
            });
            if r != api::SUCCESS {
                break;
            }
            r = self.run(L::Recv {
                recv: (self.at)(recv, r_at),
                count,
                ty,
                peer: from as c_int,
            });
            if r != api::SUCCESS {
                break;
            }
        }
        let end = self.a.group_end();
        if r != api::SUCCESS { r } else { end }
    }
}

/// The phase a rank reports while it creates its CUDA context: the launcher's watchdog gives
/// it [`CUDA_INIT_GRACE`] (a first context on a big GPU can take seconds), and counts the
/// job's own timeout only from the next phase on.
pub const CUDA_INIT: &str = "cuda init";
pub const CUDA_INIT_GRACE: Duration = Duration::from_secs(90);
/// The phase a rank reports while NCCL's init runs (`nccl init on GPU d`).
pub const NCCL_INIT: &str = "nccl init";

impl NcclRank {
    /// Open GPU `device` and join the communicator `id` as `rank` of `world`. `phase` hears
    /// `cuda init on GPU d` before the CUDA context and `nccl init on GPU d` after it.
    ///
    /// Where NCCL has ncclCommInitRankConfig (2.14+) the communicator is made non-blocking and
    /// its init polled: an init still running after `allowance` (a peer that never joins, a
    /// bootstrap dialing nowhere) is aborted by this rank with NCCL's last error in hand,
    /// rather than killed from outside. Older releases block in ncclCommInitRank.
    pub fn init(
        device: usize,
        rank: usize,
        world: usize,
        id: &[u8; 128],
        allowance: Duration,
        phase: &dyn Fn(crate::comm::Setup),
    ) -> Result<Self, WaitFault> {
        need_libs()?;
        let a = api::get()?;
        phase(crate::comm::Setup::CudaInit { gpu: device });
        let (ctx, stream) = open_gpu(device)?;
        phase(crate::comm::Setup::NcclInit { gpu: device });
        let uid = nsys::ncclUniqueId {
            internal: id.map(|b| b as std::ffi::c_char),
        };
        let (comm, parent) = join(a, uid, rank, world, allowance)?;
        Ok(Self {
            ctx,
            stream,
            comm,
            parent,
            rank,
            world,
            aborted: false,
            closed: false,
            alone: true,
            allowance,
            marks: Default::default(),
            since_mark: (0, 0),
        })
    }

    /// Single-process mode: one communicator per local GPU, all made here at once
    /// (ncclCommInitAll, what cudarc's `Comm::from_devices` wraps). Drive them with
    /// [`group`] so that one thread can launch on every GPU without deadlock.
    pub fn all(devices: usize) -> Result<Vec<Self>, NcclError> {
        need_libs()?;
        let parts = (0..devices).map(open_gpu).collect::<Result<Vec<_>, _>>()?;
        let a = api::get()?;
        let mut comms: Vec<nsys::ncclComm_t> = vec![std::ptr::null_mut(); devices];
        let ordinals: Vec<c_int> = (0..devices as c_int).collect();
        let r = a.init_all(&mut comms, &ordinals);
        // Blocking by default (no config), but `NCCL_COMM_BLOCKING=0` makes even these
        // non-blocking (envConfigOverride): ncclInProgress, and each is polled until it settles.
        let what = "ncclCommInitAll";
        if r == api::IN_PROGRESS {
            let settled = if comms.iter().any(|c| c.is_null()) {
                Err(WaitFault::Error(format!(
                    "{what} answered ncclInProgress without every communicator"
                )))
            } else {
                comms
                    .iter()
                    .try_for_each(|&c| settle(a, c, what, Duration::from_secs(60)))
            };
            if let Err(w) = settled {
                // Each was returned by ncclCommInitAll and is aborted once.
                for &c in comms.iter().filter(|c| !c.is_null()) {
                    a.abort(c);
                }
                return Err(w.into());
            }
        } else {
            check(what, r, std::ptr::null_mut())?;
        }
        Ok(parts
            .into_iter()
            .zip(comms)
            .enumerate()
            .map(|(rank, ((ctx, stream), comm))| Self {
                ctx,
                stream,
                comm,
                rank,
                world: devices,
                parent: None,
                aborted: false,
                closed: false,
                alone: false,
                allowance: Duration::from_secs(60),
                marks: Default::default(),
                since_mark: (0, 0),
            })
            .collect())
    }

    pub fn alloc(&self, bytes: usize) -> Result<DevBuf, NcclError> {
        self.stream
            .alloc_zeros::<u8>(bytes.max(1))
            .map(DevBuf)
            .map_err(derr(&format!("allocating {bytes} bytes on GPU")))
    }

    /// Copy `host` into `dst` at byte `offset` (bounds checked).
    pub fn upload(&self, host: &[u8], dst: &mut DevBuf, offset: usize) -> Result<(), NcclError> {
        let end = offset + host.len();
        if end > dst.len() {
            return Err(NcclError::UploadTooBig {
                len: host.len(),
                at: offset,
                cap: dst.len(),
            });
        }
        let mut view = dst.0.slice_mut(offset..end);
        self.stream
            .memcpy_htod(host, &mut view)
            .map_err(derr("copying to the GPU"))
    }

    pub fn download(&self, src: &DevBuf, host: &mut [u8]) -> Result<(), NcclError> {
        if host.len() > src.len() {
            return Err(NcclError::DownloadTooBig {
                len: host.len(),
                cap: src.len(),
            });
        }
        let view = src.0.slice(0..host.len());
        self.stream
            .memcpy_dtoh(&view, host)
            .map_err(derr("copying from the GPU"))?;
        self.stream.synchronize().map_err(derr("synchronizing"))
    }

    /// Enqueue one collective of `count` elements (the whole array, as in nccl-tests' size
    /// column) on this rank's stream, `shift` bytes into both buffers (nccl-tests' per-iteration
    /// shift). The buffers are checked against what NCCL will read and write before anything
    /// is enqueued.
    #[allow(clippy::too_many_arguments)]
    pub fn enqueue(
        &mut self,
        coll: Collective,
        op: Op,
        root: usize,
        dtype: Dtype,
        count: usize,
        shift: usize,
        bufs: Bufs<'_>,
    ) -> Result<(), WaitFault> {
        let es = dtype.size();
        let (send_len, recv_len) = match &bufs {
            Bufs::InPlace(b) => (b.len(), b.len()),
            Bufs::OutOfPlace(s, r) => (s.len(), r.len()),
        };
        if !shift.is_multiple_of(es) {
            let api = coll.nccl_api();
            return Err(NcclError::Shift { api, shift, es }.into());
        }
        // What is left of each buffer past the shift must hold the call.
        let (send_len, recv_len) = (
            send_len.saturating_sub(shift),
            recv_len.saturating_sub(shift),
        );
        check_bufs(coll, count, es, self.world, root, send_len, recv_len)?;
        let a = api::get()?;
        // The device pointers and the guards that keep their buffers' tracking alive until
        // the call has been enqueued.
        let (send, recv, _guards) = match &bufs {
            Bufs::InPlace(b) => {
                let (p, g) = b.0.device_ptr(&self.stream);
                (p, p, (g, None))
            }
            Bufs::OutOfPlace(s, r) => {
                let (sp, g1) = s.0.device_ptr(&self.stream);
                let (rp, g2) = r.0.device_ptr(&self.stream);
                (sp, rp, (g1, Some(g2)))
            }
        };
        let site = Site {
            a,
            comm: self.comm,
            stream: self.stream.cu_stream() as nsys::cudaStream_t,
            ty: nccl_type(dtype) as c_int,
            op: nccl_op(op) as c_int,
            root: root as c_int,
            at: |base: u64, elems: usize| (base + (shift + elems * es) as u64) as *mut c_void,
        };
        match site.launch(coll, count, self.rank, self.world, (send, recv)) {
            api::SUCCESS => {}
            // Only a non-blocking communicator answers so (NCCL_COMM_BLOCKING=0, or a NCCL
            // without ncclCommSplit): its launch runs on NCCL's thread, connecting first where
            // NCCL >= 2.22 connects at the first call, and must settle before the next call.
            // Still unsettled after the allowance is a hang, not an error (M1).
            api::IN_PROGRESS => settle(a, self.comm, coll.nccl_api(), self.allowance)?,
            code => return Err(describe(coll.nccl_api(), code, self.comm).into()),
        }
        self.since_mark.0 += count * es;
        self.since_mark.1 += 1;
        Ok(())
    }

    /// Record a progress mark on the stream when one is due. Call it after the launch, outside
    /// any group: inside ncclGroupStart/End the collective is not on the stream yet (NCCL
    /// launches at the outermost ncclGroupEnd), so a mark recorded there would complete before
    /// the work it stands for.
    pub fn mark_progress(&mut self) -> Result<(), NcclError> {
        if self.since_mark.0 >= MARK_BYTES || self.since_mark.1 >= MARK_CALLS {
            self.since_mark = (0, 0);
            use cudarc::driver::sys::CUevent_flags;
            let ev = self
                .stream
                .context()
                .new_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
                .map_err(derr("creating a progress mark"))?;
            ev.record(&self.stream)
                .map_err(derr("recording a progress mark"))?;
            self.marks.push_back(ev);
        }
        Ok(())
    }

    /// Wait for everything enqueued on this rank's stream, watching NCCL as PyTorch's
    /// watchdog does: the stream is polled (cuStreamQuery), NCCL's asynchronous error is read
    /// between polls (ncclCommGetAsyncError), and after `timeout` without progress (no
    /// progress mark completing) the wait gives up. `on_progress` runs each time a mark
    /// completes. Either way out leaves the communicator to [`NcclRank::abort`].
    pub fn wait(
        &mut self,
        timeout: std::time::Duration,
        on_progress: &mut dyn FnMut(),
    ) -> Result<(), WaitFault> {
        use cudarc::driver::sys::{CUresult, cuStreamQuery};
        // Queries act on the current context: make it this rank's (single-process mode drives
        // several GPUs from one thread).
        self.ctx.bind_to_thread().map_err(|e| {
            WaitFault::Error(format!(
                "binding rank {}'s GPU context (device {}): {e:?}",
                self.rank,
                self.ctx.ordinal()
            ))
        })?;
        let mut last_progress = std::time::Instant::now();
        let mut polls = 0u32;
        loop {
            while self
                .marks
                .front()
                .is_some_and(|m| m.try_is_complete().unwrap_or(false))
            {
                self.marks.pop_front();
                last_progress = std::time::Instant::now();
                on_progress();
            }
            // SAFETY: the stream belongs to this rank's live context.
            let idle = match unsafe { cuStreamQuery(self.stream.cu_stream()) } {
                CUresult::CUDA_SUCCESS => true,
                CUresult::CUDA_ERROR_NOT_READY => false,
                other => {
                    return Err(WaitFault::Error(format!(
                        "the GPU stream failed: {other:?} (a kernel fault or a lost GPU)"
                    )));
                }
            };
            // Read after an idle stream too: an error NCCL raised while the last call ran
            // would otherwise surface only at the next call, which the last call of a run
            // never has (L9; NCCL re-raises it there, v2.28.9-1 `src/enqueue.cc:2637`).
            self.async_error()?;
            if idle {
                self.marks.clear();
                return Ok(());
            }
            if last_progress.elapsed() > timeout {
                return Err(WaitFault::Timeout(format!(
                    "rank {}: the GPU work enqueued made no progress for {} s (NCCL still waiting on a peer?)",
                    self.rank,
                    timeout.as_secs()
                )));
            }
            // Spin as nccl-tests does (a sleep here would land inside the timed region);
            // yield now and then so ranks sharing cores still run.
            polls = polls.wrapping_add(1);
            if polls.is_multiple_of(1024) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// NCCL's asynchronous error on the communicator, if it has one (ncclInProgress is none).
    fn async_error(&self) -> Result<(), WaitFault> {
        let a = api::get()?;
        let (r, async_err) = a.async_error(self.comm);
        for code in [r, async_err] {
            if !matches!(code, api::SUCCESS | api::IN_PROGRESS) {
                return Err(describe("NCCL (asynchronous error)", code, self.comm).into());
            }
        }
        Ok(())
    }

    /// After a [`group`] that ended in progress: wait until this communicator's part of it
    /// has been launched (a hang past the allowance, an error as NCCL says).
    pub fn settle_launch(&self) -> Result<(), WaitFault> {
        let a = api::get()?;
        settle(a, self.comm, "ncclGroupEnd", self.allowance)
    }

    /// ncclCommAbort: stop this communicator's work and free it without waiting on a stream
    /// that may never finish (the split child first, then its parent). Idempotent.
    pub fn abort(&mut self) {
        if !self.aborted && !self.closed {
            self.aborted = true;
            if let Ok(a) = api::get() {
                let live = std::iter::once(self.comm).chain(self.parent);
                // Each communicator was initialised and is aborted once.
                for c in live.filter(|c| !c.is_null()) {
                    a.abort(c);
                }
            }
        }
    }

    /// Tear down after a clean run: wait for the stream, then finalize (polled where NCCL
    /// answers ncclInProgress) and destroy each communicator, the child before its parent.
    /// A failure is reported (L9: a finalize that fails is an error of the run, not silent);
    /// the communicators are then aborted instead.
    pub fn close(&mut self) -> Result<(), NcclError> {
        if self.aborted || self.closed {
            return Ok(());
        }
        let a = api::get()?;
        let rank = self.rank;
        let on_rank = move |e: NcclError| NcclError::OnRank {
            rank,
            source: Box::new(e),
        };
        if let Err(WaitFault::Error(m) | WaitFault::Timeout(m)) =
            self.wait(Duration::from_secs(10), &mut || {})
        {
            self.abort();
            return Err(on_rank(NcclError::Gave(format!("before teardown: {m}"))));
        }
        self.closed = true;
        // The child before the parent; each taken out of `self` first, so that nothing here
        // can reach a communicator already destroyed.
        let child = std::mem::replace(&mut self.comm, std::ptr::null_mut());
        let mut first_err = None;
        for c in std::iter::once(child).chain(self.parent.take()) {
            let finalized = if self.alone { finalize(a, c) } else { Ok(()) };
            let done = match finalized {
                Err(e) => {
                    // A live communicator whose finalize failed: aborted once.
                    a.abort(c);
                    Err(NcclError::Aborted {
                        source: Box::new(e),
                    })
                }
                // Finalized and idle, destroyed once (the child before its parent).
                Ok(()) => check("ncclCommDestroy", a.destroy(c), c),
            };
            if let Err(e) = done {
                first_err.get_or_insert(on_rank(e));
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

/// ncclCommFinalize where NCCL has it (2.14+), polled until done: it may answer ncclInProgress.
fn finalize(a: &api::Api, comm: nsys::ncclComm_t) -> Result<(), NcclError> {
    let Some(r) = a.finalize(comm) else {
        return Ok(());
    };
    if !matches!(r, api::SUCCESS | api::IN_PROGRESS) {
        return Err(describe("ncclCommFinalize", r, comm));
    }
    Ok(settle(
        a,
        comm,
        "ncclCommFinalize",
        Duration::from_secs(10),
    )?)
}

/// What an enqueue checks before NCCL touches device memory: both buffers hold the whole
/// array (`count` × `es` bytes: NCCL reads and writes at most that, at the rank's chunk for
/// reduce-scatter and all-gather) and a root is a rank.
#[allow(clippy::too_many_arguments)]
pub fn check_bufs(
    coll: Collective,
    count: usize,
    es: usize,
    world: usize,
    root: usize,
    send_len: usize,
    recv_len: usize,
) -> Result<(), NcclError> {
    let api = coll.nccl_api();
    let need = count
        .checked_mul(es)
        .ok_or(NcclError::Overflow { api, count, es })?;
    if send_len < need || recv_len < need {
        return Err(NcclError::ShortBuffers {
            api,
            count,
            es,
            need,
            send: send_len,
            recv: recv_len,
        });
    }
    // NCCL takes one per-rank count from every rank (recvcount, sendcount): a count that does
    // not split evenly gives ranks different chunks, and NCCL would read or write past the
    // end of the larger ones.
    if matches!(coll, Collective::ReduceScatter | Collective::AllGather)
        && !count.is_multiple_of(world.max(1))
    {
        return Err(NcclError::Uneven { api, count, world });
    }
    if coll.has_root() && root >= world {
        return Err(NcclError::NoSuchRoot { api, root, world });
    }
    Ok(())
}

/// Run `f` between ncclGroupStart and ncclGroupEnd (one thread, several communicators). The
/// flag says the group ended in progress (non-blocking communicators: each must then be
/// settled, [`NcclRank::settle_launch`], before its next call).
pub fn group<T>(f: impl FnOnce() -> Result<T, WaitFault>) -> Result<(T, bool), WaitFault> {
    let a = api::get()?;
    check("ncclGroupStart", a.group_start(), std::ptr::null_mut())?;
    let r = f();
    // The group is closed even when a call inside it failed.
    let end = a.group_end();
    let v = r?;
    match end {
        api::IN_PROGRESS => Ok((v, true)),
        code => Ok(check("ncclGroupEnd", code, std::ptr::null_mut()).map(|()| (v, false))?),
    }
}

impl Drop for NcclRank {
    /// Whatever was not closed or aborted: closed now (a failure then aborts, unreported:
    /// call [`NcclRank::close`] to hear it).
    fn drop(&mut self) {
        let _ = self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 2.14 head of ncclConfig_t as nccl.h lays it out on 64-bit Linux: size at 0, magic
    /// at 8, version at 12, blocking at 16, 24 bytes with the padding NCCL 2.17+ would read as
    /// cgaClusterSize (zeroed, and reset by NCCL since `version` says 2.14).
    #[cfg(target_pointer_width = "64")]
    #[test]
    fn the_config_head_has_ncclconfig_ts_layout() {
        let c = api::Config14::nonblocking();
        assert_eq!(std::mem::size_of::<api::Config14>(), 24);
        // SAFETY: reading the bytes of a plain repr(C) struct of integers.
        let b: [u8; 24] = unsafe { std::mem::transmute(c) };
        assert_eq!(u64::from_ne_bytes(b[0..8].try_into().expect("8")), 24);
        assert_eq!(
            u32::from_ne_bytes(b[8..12].try_into().expect("4")),
            0xcafe_beef
        );
        assert_eq!(u32::from_ne_bytes(b[12..16].try_into().expect("4")), 21400);
        assert_eq!(i32::from_ne_bytes(b[16..20].try_into().expect("4")), 0);
        assert_eq!(&b[20..24], &[0, 0, 0, 0]);
    }

    /// L5 and H1: the split's config is ncclConfig_t as NVIDIA/nccl v2.28.9-1 `src/nccl.h.in`
    /// lays it out on 64-bit Linux, so NCCL 2.28+ reads splitShare and nvlinkCentricSched where
    /// they are; every unset field is NCCL_CONFIG_UNDEF_INT.
    #[cfg(target_pointer_width = "64")]
    #[test]
    fn the_timed_config_has_ncclconfig_ts_2_28_layout() {
        use std::mem::offset_of;
        assert_eq!(std::mem::size_of::<api::Config28>(), 80);
        assert_eq!(offset_of!(api::Config28, blocking), 16);
        assert_eq!(offset_of!(api::Config28, net_name), 32);
        assert_eq!(offset_of!(api::Config28, split_share), 40);
        assert_eq!(offset_of!(api::Config28, comm_name), 48);
        assert_eq!(offset_of!(api::Config28, nvlink_centric_sched), 76);
        let c = api::Config28::timed();
        assert_eq!((c.size, c.magic, c.version), (80, 0xcafe_beef, 22800));
        assert_eq!((c.blocking, c.nvlink_centric_sched), (1, 1));
        // Sharing is the parent's to say (NCCL reads the parent's splitShare): left unset.
        assert_eq!(c.split_share, api::UNDEF_INT);
        assert_eq!(c.cga_cluster_size, api::UNDEF_INT);
        assert!(c.net_name.is_null() && c.comm_name.is_null());
    }

    /// NCCL_COMM_BLOCKING as envConfigOverride reads it: 0 or 1 win, anything else is ignored.
    #[test]
    fn nccl_comm_blocking_is_read_as_nccl_reads_it() {
        assert_eq!(env_blocking(Some("1")), Some(true));
        assert_eq!(env_blocking(Some(" 0 ")), Some(false));
        assert_eq!(env_blocking(Some("0x1")), Some(true));
        assert_eq!(env_blocking(Some("2")), None);
        assert_eq!(env_blocking(Some("yes")), None);
        assert_eq!(env_blocking(None), None);
    }

    #[test]
    fn the_unique_id_survives_the_store_as_hex() {
        let mut id = [0u8; 128];
        for (i, b) in id.iter_mut().enumerate() {
            *b = (i * 37 + 11) as u8;
        }
        let hex = id_hex(&id);
        assert_eq!(hex.len(), 256);
        assert_eq!(id_from_hex(&hex).expect("round trip"), id);
        assert!(
            id_from_hex(&hex[..254])
                .expect_err("short")
                .to_string()
                .contains("256")
        );
        let mut bad = hex.clone();
        bad.replace_range(10..12, "zz");
        assert!(
            id_from_hex(&bad)
                .expect_err("bad")
                .to_string()
                .contains("digit 10")
        );
        let wide = "é".repeat(128);
        assert!(
            id_from_hex(&wide).is_err(),
            "non-ASCII is an error, not a panic"
        );
    }

    #[test]
    fn nccl_is_loaded_only_with_a_gpu_to_use_it_on_or_when_asked() {
        assert!(!may_load_nccl(false, false, 0), "auto without a driver");
        assert!(
            !may_load_nccl(false, true, 0),
            "auto with a driver but no GPU"
        );
        assert!(may_load_nccl(false, true, 1));
        assert!(
            may_load_nccl(true, false, 0),
            "doctor / --backend nccl asked"
        );
    }

    #[test]
    fn nccl_failures_read_in_nccls_words() {
        let m = error_text(
            "ncclAllReduce",
            "ncclSystemError",
            2,
            "unhandled system error (run with NCCL_DEBUG=INFO for details)",
            "socketProgress: Connection closed by remote peer",
        );
        assert_eq!(
            m,
            "ncclAllReduce failed: ncclSystemError (2): unhandled system error (run with \
             NCCL_DEBUG=INFO for details); NCCL's last error: socketProgress: Connection closed \
             by remote peer"
        );
        assert_eq!(
            error_text("ncclGroupEnd", "ncclInvalidUsage", 5, "", ""),
            "ncclGroupEnd failed: ncclInvalidUsage (5)"
        );
        // Errors name the call as NCCL's API spells it, for every collective.
        use crate::collective::Collective;
        for c in Collective::ALL {
            let api = c.nccl_api();
            assert!(api.starts_with("nccl") && !api.contains('_'), "{api}");
        }
        assert_eq!(Collective::ReduceScatter.nccl_api(), "ncclReduceScatter");
    }

    #[test]
    fn an_enqueue_that_would_overrun_a_buffer_is_refused() {
        let c = Collective::AllReduce;
        assert!(check_bufs(c, 256, 4, 2, 0, 1024, 1024).is_ok());
        let e = check_bufs(c, 256, 4, 2, 0, 1024, 1020)
            .expect_err("short receive")
            .to_string();
        assert!(e.contains("needs buffers of 1024 B"), "{e}");
        assert!(
            check_bufs(c, 257, 4, 2, 0, 1024, 1024).is_err(),
            "short send"
        );
        assert!(
            check_bufs(c, usize::MAX, 8, 2, 0, 1, 1).is_err(),
            "overflow"
        );
        let e = check_bufs(Collective::Broadcast, 4, 4, 2, 2, 16, 16)
            .expect_err("root")
            .to_string();
        assert!(e.contains("root 2"), "{e}");
        assert!(check_bufs(Collective::AllGather, 4, 4, 2, 9, 16, 16).is_ok());
        // A reduce-scatter or all-gather count must split evenly: 10 over 3 ranks would give
        // one rank a chunk of 4 and NCCL 4 × 3 = 12 elements to read from each.
        for c in [Collective::ReduceScatter, Collective::AllGather] {
            let e = check_bufs(c, 10, 4, 3, 0, 40, 40)
                .expect_err("uneven")
                .to_string();
            assert!(e.contains("do not split evenly over 3 ranks"), "{e}");
            assert!(e.starts_with(c.nccl_api()), "{e}");
            assert!(check_bufs(c, 12, 4, 3, 0, 48, 48).is_ok());
        }
    }

    #[test]
    fn nccl_version_codes_read_like_nccl() {
        assert_eq!(version_string(22105), "2.21.5");
        assert_eq!(version_string(2708), "2.7.8");
    }

    #[test]
    fn probing_a_machine_never_panics() {
        // On a machine without CUDA this must say so; with it, the GPUs are listed.
        let p = probe(false);
        assert_eq!(
            p.nccl_not_loaded.is_some(),
            !may_load_nccl(false, p.driver_lib, p.gpus.len())
        );
        if !p.driver_lib {
            assert!(p.gpus.is_empty());
            assert!(p.driver_version.is_none());
        }
        if !p.nccl_lib {
            assert!(p.nccl_version.is_none());
            assert!(new_id().is_err());
        }
    }
}
