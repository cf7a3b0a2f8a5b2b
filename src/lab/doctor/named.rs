//! Findings in NCCL's own words: every WARN line of the logs (and the last error PyTorch
//! quotes) named through NCCL's message table ([`nccl_log::warnings`]). A row the doctor knows
//! a cause for becomes that finding; any other named row an `nccl-warning` with the row's
//! meaning and fix; a WARN the table does not know an `unknown-warning`, listed with its line.

use nccl_log::warnings::{Match, Row};

use super::*;

/// One WARN line and the row that names it.
pub(super) struct Warned<'a> {
    pub line: &'a Line<'a>,
    pub row: Option<(&'static Row, Match)>,
}

/// Every WARN line, with the row that named it when it was parsed.
pub(super) fn warnings<'a>(lines: &'a [Line<'a>]) -> Vec<Warned<'a>> {
    lines
        .iter()
        .filter(|l| l.p.level == nccl_log::Level::Warn)
        .map(|line| Warned {
            line,
            row: line.row,
        })
        .collect()
}

/// Rows of NCCL's message table whose id alone names the cause (an id and its older
/// wordings: `shm-extend-failed`, `shm-extend-failed-2-12`, … share the prefix).
const BY_ID: &[(&str, Kind)] = &[
    ("duplicate-gpu", Kind::DuplicateGpu),
    ("shm-", Kind::ShmTooSmall),
    ("ib-gid", Kind::RoceGid),
    ("ib-modify-qp-failed", Kind::RoceGid),
    ("cuda-calloc", Kind::CudaOom),
    ("cuda-alloc", Kind::CudaOom),
    ("cuda-host-alloc", Kind::CudaOom),
    ("nvls-bind-failed", Kind::FabricManager),
    ("nvls-register-failed", Kind::FabricManager),
    ("nvls-multicast-unavailable", Kind::FabricManager),
    ("peer-closed", Kind::PeerGone),
    ("version-mismatch", Kind::VersionsDiffer),
    ("no-socket-interface", Kind::IfnameNoMatch),
    ("socket-ifname-no-match", Kind::IfnameNoMatch),
    ("ib-collective-mismatch", Kind::CollectiveMismatch),
    ("collective-mismatch", Kind::CollectiveMismatch),
    ("socket-message-truncated", Kind::CollectiveMismatch),
    ("bootstrap-message-truncated", Kind::CollectiveMismatch),
    ("topo-attribute-missing", Kind::TopoFile),
    ("socket-create-failed", Kind::NoSocketInterface),
    ("socket-wrong-magic", Kind::ForeignConnection),
    ("invalid-usage", Kind::InvalidUsage),
    ("comm-destroyed-twice", Kind::InvalidUsage),
    ("comm-not-ready", Kind::InvalidUsage),
    ("group-", Kind::InvalidUsage),
    ("p2p-self-unmatched", Kind::InvalidUsage),
];

/// The cause a WARN shows, where the doctor knows one: by the row's id, then by the values the
/// message carries (an IB completion's status, CUDA's or the OS's error string), then, for a
/// line the table names only in part or not at all, by those values alone.
pub(super) fn classify(row: Option<&Row>, line: &Line) -> Kind {
    let id = row.and_then(|r| r.id.as_deref()).unwrap_or("");
    let t = line.msg.to_ascii_lowercase();
    let has = |s: &str| t.contains(s);
    // The source file NCCL printed before `NCCL WARN`: a CUDA failure in transport/nvls.cc
    // is NVLS's, whatever the error string.
    let place = line.p.place.as_ref().map_or("", |(f, _)| f.as_str());
    // CUDA's own error text, also where no row names the line (nccl-tests' `Test CUDA
    // failure`, a message PyTorch quotes).
    let cuda = id.starts_with("cuda-") || has("cuda failure") || has("cuda error");
    let memlock = id.starts_with("ib-reg-mr") || id.starts_with("ib-create-cq");
    match () {
        _ if id.starts_with("ib-completion") => ib_completion(&t),
        _ if memlock && has("cannot allocate memory") => Kind::Memlock,
        _ if cuda && has("out of memory") => Kind::CudaOom,
        _ if cuda && (place.contains("nvls") || has("nvls")) => Kind::FabricManager,
        _ if has("system not yet initialized") || has("failure 802") => Kind::FabricManager,
        _ if cuda
            && (has("no kernel image")
                || has("named symbol not found")
                || has("invalid device function")) =>
        {
            Kind::NcclTooOld
        }
        _ if let Some((_, k)) = BY_ID.iter().find(|(p, _)| id.starts_with(p)) => *k,
        _ if cuda => Kind::CudaError,
        _ if has("no route to host") || has("network is unreachable") => Kind::UnreachablePeer,
        // NCCL's own text for ncclRemoteError, and the OS's for a reset: a peer went away.
        _ if has("remote process exited") || has("connection reset by peer") => Kind::PeerGone,
        _ if matches!(line.m, Msg::ShmFailed { .. }) => Kind::ShmTooSmall,
        // Before 2.3 NCCL shipped as binaries only, so no source tag gives its messages to the
        // table; this one (`Socket creation failed : …`, without 2.3's `Net : `) is in real
        // logs of those releases.
        _ if row.is_none() && has("socket creation failed") => Kind::NoSocketInterface,
        _ if row.is_some() => Kind::NcclWarning,
        _ => Kind::UnknownWarning,
    }
}

/// An InfiniBand work completion with an error: status 12 (IBV_WC_RETRY_EXC_ERR) is the
/// transport giving up on an unanswered packet; status 4 (IBV_WC_LOC_PROT_ERR) with vendor
/// error 81, as NCCL prints it, under GPUDirect RDMA is the NIC unable to reach GPU memory
/// across the PCIe switch.
fn ib_completion(t: &str) -> Kind {
    let status = t
        .split_once("with error ")
        .or_else(|| t.split_once("status="))
        .and_then(|(_, r)| {
            r.trim_start_matches(|c: char| !c.is_ascii_digit())
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|n| n.parse::<u32>().ok())
        });
    let vendor = t
        .split_once("vendor err ")
        .or_else(|| t.split_once("vendor_err="))
        .and_then(|(_, r)| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse::<u32>().ok());
    match (status, vendor) {
        (Some(12), _) => Kind::IbRetryExceeded,
        (Some(4), Some(81)) => Kind::IbGdrPci,
        _ if t.contains("retry_exc") => Kind::IbRetryExceeded,
        _ => Kind::NcclWarning,
    }
}

/// What the doctor says of each cause a WARN can show: the summary's start, the fix and how
/// to confirm. One row per kind.
const SAID: &[(Kind, &str, &str, &str)] = &[
    (
        Kind::DuplicateGpu,
        "two ranks of one communicator are on the same GPU: NCCL refuses (ncclInvalidUsage)",
        "Give every rank its own GPU: with torchrun call torch.cuda.set_device(local_rank) \
         before init_process_group (or pass device_id); with mpirun or srun map the local rank \
         to a device (CUDA_VISIBLE_DEVICES per rank, or --gpus-per-task=1); in containers check \
         each one sees a different GPU.",
        "Print torch.cuda.current_device() (or the busId NCCL logs at Init) on every rank: two \
         ranks print the same one.",
    ),
    (
        Kind::ShmTooSmall,
        "NCCL could not create or grow its shared-memory segment in /dev/shm: /dev/shm is too \
         small (Docker gives a container 64 MB) or full",
        "Give /dev/shm room: `docker run --shm-size=16g` (or `--ipc=host`); in Kubernetes \
         mount an `emptyDir: {medium: Memory}` at /dev/shm; remove stale /dev/shm/nccl-* files. \
         As a stopgap NCCL_SHM_DISABLE=1 routes around SHM, more slowly.",
        "`df -h /dev/shm` where the ranks run.",
    ),
    (
        Kind::IbRetryExceeded,
        "an InfiniBand/RoCE send was never acknowledged (completion status 12, \
         IBV_WC_RETRY_EXC_ERR): the NIC gave up retransmitting. The peer's process may be \
         gone, or the fabric drops packets (a bad link or cable, congestion without PFC/ECN on \
         RoCE, a wrong GID or route)",
        "First check whether the peer rank died (its own log); if not, check the link: \
         `ibstat`/`ibv_devinfo` port state and rate, the switch port counters (`perfquery`, \
         symbol and link-down counters), PFC/ECN on RoCE, and NCCL_IB_GID_INDEX; NCCL_IB_TIMEOUT \
         raises the retry window but does not fix a lossy link.",
        "`ibdiagnet` or `perfquery -x` on both ends shows the errors; `ib_write_bw` between the \
         two hosts reproduces it without NCCL.",
    ),
    (
        Kind::IbGdrPci,
        "an InfiniBand completion failed with a local protection error (error 4, vendor err \
         81): with GPUDirect RDMA this is the NIC unable to reach GPU memory across PCIe, \
         almost always PCI Access Control Services (ACS) or the IOMMU redirecting peer traffic",
        "Disable ACS on the PCIe switches between NIC and GPU (BIOS, or `setpci` at boot) and \
         put the IOMMU in passthrough (`iommu=pt`, or off); on VMs enable ATS. To confirm \
         NCCL_NET_GDR_LEVEL=LOC (no GPUDirect RDMA) makes the error go away.",
        "`sudo lspci -vvv | grep ACSCtl` shows SrcValid+ on the bridges; `dmesg` may show \
         IOMMU faults.",
    ),
    (
        Kind::Memlock,
        "registering memory with the InfiniBand driver failed with Cannot allocate memory: the \
         locked-memory limit (ulimit -l) is too low for NCCL's buffers",
        "Raise the memlock limit where the ranks run: `ulimit -l unlimited` (limits.conf), \
         `docker run --ulimit memlock=-1`, `LimitMEMLOCK=infinity` for systemd units and \
         Slurm's slurmd (PropagateResourceLimits).",
        "`ulimit -l` inside the job (not your login shell) prints a small number such as 64 or \
         8192.",
    ),
    (
        Kind::RoceGid,
        "setting up an RDMA queue pair failed in a way that on RoCE usually means the GID \
         index: NCCL uses a GID (address) the other side cannot route to, such as the \
         link-local one",
        "Choose the RoCEv2 GID that carries the routable IP: `show_gids` lists them; set \
         NCCL_IB_GID_INDEX to it (often 3), or, from NCCL 2.21, leave NCCL_IB_GID_INDEX unset \
         and let NCCL pick by NCCL_IB_ADDR_FAMILY, NCCL_IB_ADDR_RANGE and \
         NCCL_IB_ROCE_VERSION_NUM.",
        "`show_gids` (or /sys/class/infiniband/*/ports/*/gids) on both hosts: the index in use \
         has an fe80:: address or RoCE v1.",
    ),
    (
        Kind::CudaOom,
        "NCCL could not allocate its GPU buffers: the GPU is out of memory (the framework's \
         caching allocator, another process, or NCCL's own buffers for many channels and peers)",
        "Leave NCCL headroom: create communicators before the model fills memory, call \
         torch.cuda.empty_cache() before a new group, check nvidia-smi for other processes; \
         NCCL_BUFFSIZE and NCCL_MAX_NCHANNELS shrink NCCL's share.",
        "nvidia-smi at the failure shows the GPU full.",
    ),
    (
        Kind::FabricManager,
        "a CUDA call for NVLink SHARP (NVLS) or multicast memory failed: on NVSwitch systems \
         this needs the Fabric Manager running and healthy (CUDA error 802, system not yet \
         initialized, is it not running; a restarted Fabric Manager needs a GPU reset)",
        "`systemctl status nvidia-fabricmanager` (start it; its version must match the \
         driver's); after a Fabric Manager restart reset the GPUs or reboot. To get going \
         meanwhile, NCCL_NVLS_ENABLE=0 turns NVLS off.",
        "`nvidia-smi -q | grep -A2 Fabric` shows State Completed and Status Success when \
         healthy.",
    ),
    (
        Kind::NcclTooOld,
        "CUDA could not run NCCL's kernels on this GPU: the NCCL build has no code for its \
         architecture (an NCCL release older than the GPU, or a build for other SMs)",
        "Use an NCCL build that includes the GPU's architecture (its compute capability), \
         usually by upgrading the framework wheel or the container image, whose NCCL and CUDA \
         are built for a list of architectures.",
        "The `NCCL version` banner and `nvidia-smi --query-gpu=compute_cap --format=csv`.",
    ),
    (
        Kind::CudaError,
        "a CUDA call inside NCCL failed",
        "Read CUDA's error string in the line: a driver/runtime mismatch, a GPU fault (check \
         `dmesg` for Xid errors), or a previous error on the device.",
        "`nvidia-smi` and `dmesg | grep -i xid` on the host.",
    ),
    (
        Kind::PeerGone,
        "a peer closed its connection: the remote rank exited or crashed, so this error is a \
         consequence; the cause is in that rank's log",
        "Find the rank that died first (the earliest error across all ranks' logs, or the \
         launcher's exit codes) and fix that; this rank's error follows from it.",
        "The other ranks' logs and the launcher's report of which process exited first.",
    ),
    (
        Kind::ForeignConnection,
        "something that is not an NCCL rank connected to NCCL's listening port (the bytes are \
         not NCCL's magic): a port scanner, a metrics scraper or a health check hit the port",
        "Keep scanners and scrapers off the nodes' ephemeral ports, or restrict NCCL to an \
         interface they do not reach (NCCL_SOCKET_IFNAME); NCCL drops the connection and goes \
         on, but a flood can stall bootstrap.",
        "The bytes decode to text (`GET /…`): an HTTP client.",
    ),
    (
        Kind::TopoFile,
        "NCCL's topology XML lacks an attribute it needs: a topology file given with \
         NCCL_TOPO_FILE, or one a network plugin injects (aws-ofi-nccl ships static ones for \
         AWS instance types), does not describe this machine as NCCL reads it",
        "Drop NCCL_TOPO_FILE (or the plugin's static topology) so NCCL detects the machine \
         itself, or update the plugin to a release whose topology matches the instance and the \
         GPUs the job sees; `NCCL_TOPO_DUMP_FILE=/tmp/topo.xml` writes what NCCL detects.",
        "Compare the file NCCL_TOPO_FILE (or the plugin) points at with the dump of a run \
         without it.",
    ),
    (
        Kind::InvalidUsage,
        "the program called NCCL wrongly (an invalid argument, a communicator used after it \
         was destroyed or before it was ready, a group call NCCL does not allow): the bug is in \
         the caller, the framework or your code, not in the machine",
        "Read the WARN: it names the call and the argument. Look for a framework bug at your \
         version (search its tracker for the message) or your own misuse: every rank must pass \
         the same root in range, valid device pointers, and must not use a communicator after \
         destroying or aborting it.",
        "The `file:line -> 4` (invalid argument) or `-> 5` (invalid usage) lines after the WARN \
         show the call it failed in.",
    ),
    (
        Kind::NoSocketInterface,
        "NCCL could not create a socket of the address family of the interface it chose (IPv6 \
         disabled in the kernel or the container, or no usable interface)",
        "Point NCCL at an IPv4 interface (NCCL_SOCKET_IFNAME, NCCL_SOCKET_FAMILY=AF_INET), or \
         enable IPv6 where the ranks run.",
        "`ip -br addr` and `sysctl net.ipv6.conf.all.disable_ipv6` where the ranks run.",
    ),
    (
        Kind::UnreachablePeer,
        "a connection failed with no route to host",
        "Check the route and firewall between the hosts (`ip route get ADDR`, `nc -vz ADDR \
         PORT`) and that NCCL_SOCKET_IFNAME names an interface on the shared subnet.",
        "`nc -vz` the address from this host.",
    ),
];

/// The ASCII a `wrong magic` value spells (`74656d2f20544547` → `GET /met`), if it does.
fn magic_text(text: &str) -> Option<String> {
    let hex = text
        .split_whitespace()
        .find(|w| w.len() == 16 && w.bytes().all(|b| b.is_ascii_hexdigit()))?;
    let v = u64::from_str_radix(hex, 16).ok()?;
    let s: String = v.to_le_bytes().iter().map(|&b| b as char).collect();
    s.chars()
        .all(|c| c.is_ascii_graphic() || c == ' ')
        .then_some(s)
}

/// One finding per cause (and per row for the rest), in order of first appearance.
pub(super) fn named_warnings(
    lines: &[Line],
    claimed: &BTreeSet<(String, usize)>,
    out: &mut Vec<Finding>,
) {
    let warned = warnings(lines);
    let claimed_retry = lines
        .iter()
        .any(|l| matches!(l.m, Msg::Retry(_)) && claimed.contains(&(l.file.to_string(), l.no)));
    let mut groups: Vec<(Kind, Option<&'static Row>, Vec<&Warned>)> = Vec::new();
    for w in &warned {
        // Lines a check above rests on, and connect retries (the connect-retry check reads
        // every one of them, citing the first and last), are said already.
        if claimed.contains(&(w.line.file.to_string(), w.line.no))
            || (matches!(w.line.m, Msg::Retry(_)) && claimed_retry)
        {
            continue;
        }
        let row = w.row.map(|(r, _)| r);
        let kind = classify(row, w.line);
        let key_row = matches!(kind, Kind::NcclWarning).then_some(row).flatten();
        match groups
            .iter_mut()
            .find(|(k, r, _)| *k == kind && r.map(|r| &r.format) == key_row.map(|r| &r.format))
        {
            Some(g) => g.2.push(w),
            None => groups.push((kind, key_row, vec![w])),
        }
    }
    for (kind, row, ws) in groups {
        out.push(finding(kind, row, &ws));
    }
}

fn finding(kind: Kind, row: Option<&'static Row>, ws: &[&Warned]) -> Finding {
    let mut evidence: Vec<_> = ws.iter().take(8).map(|w| w.line.evidence()).collect();
    evidence.dedup();
    let more = if ws.len() > 8 {
        format!(" ({} lines; the first 8 shown)", ws.len())
    } else {
        String::new()
    };
    let messages: Vec<MessageRef> = {
        let mut seen = BTreeSet::new();
        ws.iter()
            .filter_map(|w| w.row)
            .filter(|(r, _)| seen.insert(&r.format))
            .map(|(r, _)| MessageRef::of(r))
            .collect()
    };
    if let Some((_, said, fix, confirm)) = SAID.iter().find(|(k, ..)| *k == kind) {
        let mut summary = said.to_string();
        if kind == Kind::ForeignConnection
            && let Some(s) = ws.iter().find_map(|w| magic_text(w.line.msg))
        {
            summary.push_str(&format!(" (the bytes read \"{s}\")"));
        }
        summary.push_str(&more);
        return Finding {
            kind,
            severity: Severity::Error,
            summary,
            evidence,
            fix: fix.to_string(),
            confirm: Some(confirm.to_string()),
            messages,
        };
    }
    match row {
        Some(r) => Finding {
            kind,
            severity: r.severity,
            summary: format!("NCCL warns ({}): {}{more}", r.family, r.meaning),
            evidence,
            fix: r.fix.clone(),
            confirm: Some(r.confirm.clone()),
            messages,
        },
        None => Finding {
            kind,
            severity: Severity::Note,
            summary: format!(
                "NCCL warning not in the table ({} line(s)): ringlab's table of NCCL's messages \
                 (releases 2.4 to 2.28) has no row for it{more}",
                ws.len()
            ),
            evidence,
            fix: "Read the line and the `file:line` NCCL printed before `NCCL WARN` in that \
                  release's source; the lines just before it usually say what NCCL was doing."
                .into(),
            confirm: None,
            messages,
        },
    }
}
