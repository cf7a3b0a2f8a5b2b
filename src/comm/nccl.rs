//! The NCCL backend. Every use of cudarc is in this file, and nothing here calls into CUDA or
//! NCCL before probing that the library loads: cudarc (built with `dynamic-loading`) panics
//! when a library is missing, so [`driver_present`] and [`nccl_present`] come first, always.
//!
//! Only rank processes and the `__gpu-probe` helper load CUDA; the launcher never does, so a
//! broken driver can take down a child, never the app.
//!
//! Buffers follow nccl-tests: a collective of `count` elements runs on device buffers, in place
//! (`recvbuff == sendbuff`, with the rank's chunk offset for reduce-scatter and all-gather) or
//! out of place; iterations are launched back to back on one stream and timed with CUDA events
//! created with timing enabled (cudarc's `record_event(None)` would disable timing).

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use cudarc::nccl::{result as nres, sys as nsys};
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

/// NCCL_VERSION_CODE (major*10000 + minor*100 + patch since 2.9) as "2.21.5".
pub fn version_string(code: i32) -> String {
    if code >= 10000 {
        format!("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100)
    } else {
        format!("{}.{}.{}", code / 1000, (code % 1000) / 100, code % 100)
    }
}

/// Everything the driver and NCCL say about this machine; never panics on a machine without
/// them (the libraries are probed first).
pub fn probe() -> Probe {
    use cudarc::driver::{result as dres, sys as dsys};
    let mut p = Probe {
        driver_lib: driver_present(),
        nccl_lib: nccl_present(),
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
    if p.nccl_lib {
        match nres::get_nccl_version() {
            Ok(code) => p.nccl_version = Some(version_string(code)),
            Err(e) => p.errors.push(format!("ncclGetVersion failed: {e:?}")),
        }
    }
    p
}

/// The 128 bytes of an ncclUniqueId as 256 hex digits (what rank 0 publishes in the store).
pub fn id_hex(id: &[u8; 128]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// The inverse of [`id_hex`].
pub fn id_from_hex(s: &str) -> Result<[u8; 128], String> {
    let s = s.trim();
    if s.len() != 256 {
        return Err(format!(
            "an NCCL unique id is 256 hex digits, got {}",
            s.len()
        ));
    }
    let mut out = [0u8; 128];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16)
            .map_err(|_| format!("not hex at digit {}: `{}`", 2 * i, &s[2 * i..2 * i + 2]))?;
    }
    Ok(out)
}

fn need_libs() -> Result<(), String> {
    if !driver_present() {
        return Err(
            "the CUDA driver library (libcuda.so.1) cannot be loaded: no NVIDIA driver here".into(),
        );
    }
    if !nccl_present() {
        return Err("libnccl.so cannot be loaded: put NCCL's folder on LD_LIBRARY_PATH (the launcher does this when it finds NCCL)".into());
    }
    Ok(())
}

/// A new NCCL unique id (rank 0 makes it; NCCL's bootstrap root then lives in this process).
pub fn new_id() -> Result<[u8; 128], String> {
    need_libs()?;
    let id = nres::get_uniqueid().map_err(|e| format!("ncclGetUniqueId: {e:?}"))?;
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

/// One rank's NCCL communicator, on one GPU.
pub struct NcclRank {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    comm: nsys::ncclComm_t,
    rank: usize,
    world: usize,
    /// For in-place send/recv: the receive lands here, then is copied over the buffer.
    scratch: Option<DevBuf>,
}

fn derr<E: std::fmt::Debug>(what: &str) -> impl FnOnce(E) -> String + '_ {
    move |e| format!("{what}: {e:?}")
}

impl NcclRank {
    /// Open GPU `device` and join the communicator `id` as `rank` of `world`
    /// (ncclCommInitRank: blocks until every rank has joined; the launcher's watchdog ends a
    /// hung init).
    pub fn init(device: usize, rank: usize, world: usize, id: &[u8; 128]) -> Result<Self, String> {
        need_libs()?;
        let ctx = CudaContext::new(device).map_err(derr(&format!("opening GPU {device}")))?;
        // One stream orders everything; cudarc's per-buffer event tracking would only add work.
        // SAFETY: all work of this rank goes to `stream`, so no cross-stream tracking is needed.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(derr("creating a stream"))?;
        let uid = nsys::ncclUniqueId {
            internal: id.map(|b| b as std::ffi::c_char),
        };
        let mut comm: nsys::ncclComm_t = std::ptr::null_mut();
        // SAFETY: comm is a valid out pointer; the id came from ncclGetUniqueId on rank 0.
        unsafe { nres::comm_init_rank(&mut comm, world as i32, uid, rank as i32) }
            .map_err(derr("ncclCommInitRank"))?;
        Ok(Self {
            ctx,
            stream,
            comm,
            rank,
            world,
            scratch: None,
        })
    }

    /// Single-process mode: one communicator per local GPU, all made here at once
    /// (ncclCommInitAll, what cudarc's `Comm::from_devices` wraps). Drive them with
    /// [`group`] so that one thread can launch on every GPU without deadlock.
    pub fn all(devices: usize) -> Result<Vec<Self>, String> {
        need_libs()?;
        let mut parts = Vec::with_capacity(devices);
        for d in 0..devices {
            let ctx = CudaContext::new(d).map_err(derr(&format!("opening GPU {d}")))?;
            // SAFETY: each GPU's work goes to its one stream.
            unsafe { ctx.disable_event_tracking() };
            let stream = ctx.new_stream().map_err(derr("creating a stream"))?;
            parts.push((ctx, stream));
        }
        let mut comms: Vec<nsys::ncclComm_t> = vec![std::ptr::null_mut(); devices];
        let ordinals: Vec<i32> = (0..devices as i32).collect();
        // SAFETY: comms has room for `devices` communicators; ordinals lists as many devices.
        unsafe { nres::comm_init_all(comms.as_mut_ptr(), devices as i32, ordinals.as_ptr()) }
            .map_err(derr("ncclCommInitAll"))?;
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
                scratch: None,
            })
            .collect())
    }

    pub fn alloc(&self, bytes: usize) -> Result<DevBuf, String> {
        self.stream
            .alloc_zeros::<u8>(bytes.max(1))
            .map(DevBuf)
            .map_err(derr(&format!("allocating {bytes} bytes on GPU")))
    }

    pub fn upload(&self, host: &[u8], dst: &mut DevBuf) -> Result<(), String> {
        let mut view = dst.0.slice_mut(0..host.len());
        self.stream
            .memcpy_htod(host, &mut view)
            .map_err(derr("copying to the GPU"))
    }

    pub fn download(&self, src: &DevBuf, host: &mut [u8]) -> Result<(), String> {
        let view = src.0.slice(0..host.len());
        self.stream
            .memcpy_dtoh(&view, host)
            .map_err(derr("copying from the GPU"))?;
        self.synchronize()
    }

    pub fn synchronize(&self) -> Result<(), String> {
        self.stream.synchronize().map_err(derr("synchronizing"))
    }

    /// Enqueue one collective of `count` elements (the whole array, as in nccl-tests' size
    /// column) on this rank's stream.
    pub fn enqueue(
        &mut self,
        coll: Collective,
        op: Op,
        root: usize,
        dtype: Dtype,
        count: usize,
        bufs: Bufs<'_>,
    ) -> Result<(), String> {
        let es = dtype.size();
        // This rank's chunk, as the schedules and the checker define it: reduce-scatter leaves
        // its result there, all-gather takes its contribution from there (nccl-tests' in-place
        // layout).
        let mine = crate::collective::chunk_range(count, self.world, self.rank);
        let ty = nccl_type(dtype);
        let stream = self.stream.cu_stream() as nsys::cudaStream_t;
        if coll == Collective::SendRecv
            && matches!(bufs, Bufs::InPlace(_))
            && self.scratch.as_ref().is_none_or(|s| s.len() < count * es)
        {
            self.scratch = Some(self.alloc(count * es)?);
        }
        let (send, recv): (u64, u64) = match &bufs {
            Bufs::InPlace(b) => {
                let (p, _g) = b.0.device_ptr(&self.stream);
                (p, p)
            }
            Bufs::OutOfPlace(s, r) => {
                let (sp, _g1) = s.0.device_ptr(&self.stream);
                let (rp, _g2) = r.0.device_ptr(&self.stream);
                (sp, rp)
            }
        };
        let at = |base: u64, elems: usize| (base + (elems * es) as u64) as *mut c_void;
        let comm = self.comm;
        let root = root as i32;
        // SAFETY: the pointers address live device buffers of at least count × es bytes
        // (checked by the callers' allocation), the communicator is initialised, and the
        // stream belongs to this rank's context.
        let r = unsafe {
            match coll {
                Collective::AllReduce => nres::all_reduce(
                    at(send, 0),
                    at(recv, 0),
                    count,
                    ty,
                    nccl_op(op),
                    comm,
                    stream,
                ),
                Collective::ReduceScatter => nres::reduce_scatter(
                    at(send, 0),
                    at(recv, mine.start),
                    mine.len(),
                    ty,
                    nccl_op(op),
                    comm,
                    stream,
                ),
                Collective::AllGather => nres::all_gather(
                    at(send, mine.start),
                    at(recv, 0),
                    mine.len(),
                    ty,
                    comm,
                    stream,
                ),
                Collective::Broadcast => {
                    nres::broadcast(at(send, 0), at(recv, 0), count, ty, root, comm, stream)
                }
                Collective::Reduce => nres::reduce(
                    at(send, 0),
                    at(recv, 0),
                    count,
                    ty,
                    nccl_op(op),
                    root,
                    comm,
                    stream,
                ),
                Collective::SendRecv => {
                    let w = self.world;
                    let to = ((self.rank + 1) % w) as i32;
                    let from = ((self.rank + w - 1) % w) as i32;
                    let into = match (&bufs, &self.scratch) {
                        (Bufs::InPlace(_), Some(s)) => s.0.device_ptr(&self.stream).0,
                        _ => recv,
                    };
                    nres::group_start()
                        .and_then(|_| nres::send(at(send, 0), count, ty, to, comm, stream))
                        .and_then(|_| nres::recv(at(into, 0), count, ty, from, comm, stream))
                        .and_then(|_| nres::group_end())
                        .and_then(|s| {
                            if into != recv {
                                cudarc::driver::result::memcpy_dtod_async(
                                    recv,
                                    into,
                                    count * es,
                                    self.stream.cu_stream(),
                                )
                                .map(|_| s)
                                .map_err(|_| {
                                    nres::NcclError(nsys::ncclResult_t::ncclUnhandledCudaError)
                                })
                            } else {
                                Ok(s)
                            }
                        })
                }
            }
        };
        r.map(|_| ())
            .map_err(|e| format!("NCCL {}: {e:?}", coll.nccl_name()))
    }

    /// Run `f` `iters` times on the stream and return the mean time per call in µs, measured
    /// with CUDA events (timing enabled) around the whole batch, as nccl-tests does.
    pub fn time(
        &mut self,
        iters: usize,
        mut f: impl FnMut(&mut Self) -> Result<(), String>,
    ) -> Result<f64, String> {
        use cudarc::driver::sys::CUevent_flags;
        let start = self
            .ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(derr("creating an event"))?;
        let end = self
            .ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(derr("creating an event"))?;
        start.record(&self.stream).map_err(derr("recording"))?;
        for _ in 0..iters.max(1) {
            f(self)?;
        }
        end.record(&self.stream).map_err(derr("recording"))?;
        let ms = start.elapsed_ms(&end).map_err(derr("reading the events"))?;
        Ok(ms as f64 * 1000.0 / iters.max(1) as f64)
    }
}

/// Run `f` between ncclGroupStart and ncclGroupEnd (one thread, several communicators).
pub fn group<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    nres::group_start().map_err(derr("ncclGroupStart"))?;
    let r = f();
    let end = nres::group_end().map_err(derr("ncclGroupEnd"));
    let v = r?;
    end?;
    Ok(v)
}

impl Drop for NcclRank {
    fn drop(&mut self) {
        let _ = self.stream.synchronize();
        // SAFETY: the communicator was initialised and is destroyed once.
        let _ = unsafe { nres::comm_destroy(self.comm) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unique_id_survives_the_store_as_hex() {
        let mut id = [0u8; 128];
        for (i, b) in id.iter_mut().enumerate() {
            *b = (i * 37 + 11) as u8;
        }
        let hex = id_hex(&id);
        assert_eq!(hex.len(), 256);
        assert_eq!(id_from_hex(&hex).expect("round trip"), id);
        assert!(id_from_hex(&hex[..254]).expect_err("short").contains("256"));
        let mut bad = hex.clone();
        bad.replace_range(10..12, "zz");
        assert!(id_from_hex(&bad).expect_err("bad").contains("digit 10"));
    }

    #[test]
    fn nccl_version_codes_read_like_nccl() {
        assert_eq!(version_string(22105), "2.21.5");
        assert_eq!(version_string(2708), "2.7.8");
    }

    #[test]
    fn probing_a_machine_never_panics() {
        // On a machine without CUDA this must say so; with it, the GPUs are listed.
        let p = probe();
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
