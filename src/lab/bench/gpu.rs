//! The launcher's side of the GPU labs, for the command line and the app alike: find NCCL, ask
//! a child process what the driver and NCCL say (the launcher itself never loads CUDA), choose
//! the backend, and prepare an NCCL launch (GPUs per rank, shared GPUs, the ranks'
//! environment, the algorithm NCCL may use).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::collective::{Algorithm, Collective};
use crate::comm::nccl::Probe;
use crate::comm::nccl::find::{self, Found};

/// What the machine offers, as seen from the launcher. Holding it keeps NCCL's private link
/// folder alive (it is removed with the last copy).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Machine {
    pub probe: Probe,
    /// Where NCCL was found, or why not.
    #[serde(skip)]
    pub nccl: Result<Found, find::FindError>,
    /// Every NCCL library the search can see (resolved file, where), the one used first.
    pub all_nccl: Vec<(PathBuf, String)>,
}

/// Whether the probe may load NCCL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadNccl {
    /// Only with a driver and a GPU to run it on (`--backend auto`).
    IfGpu,
    /// The user asked for NCCL (`doctor`, `--backend nccl`).
    Asked,
}

impl Machine {
    pub fn gpus(&self) -> usize {
        self.probe.gpus.len()
    }

    /// The environment every NCCL rank needs: LD_LIBRARY_PATH with NCCL's folder first;
    /// NCCL's log on stderr (by default NCCL_DEBUG prints to stdout, where the rank's reports
    /// to the launcher go, and a log line could land in the middle of one); and, unless the
    /// user chose a level, NCCL_DEBUG=WARN, so that NCCL's own reason for a failure reaches
    /// the screen.
    pub fn rank_env(&self) -> Vec<(String, String)> {
        let mut env = Vec::new();
        if let Ok(f) = &self.nccl {
            env.push((
                "LD_LIBRARY_PATH".into(),
                find::ld_library_path(f, std::env::var("LD_LIBRARY_PATH").ok().as_deref()),
            ));
        }
        if std::env::var_os("NCCL_DEBUG_FILE").is_none() {
            env.push(("NCCL_DEBUG_FILE".into(), "/dev/stderr".into()));
        }
        if std::env::var_os("NCCL_DEBUG").is_none() {
            env.push(("NCCL_DEBUG".into(), "WARN".into()));
        }
        env
    }

    /// Why the nccl backend cannot run here, with what still works; None when it can.
    pub fn nccl_unavailable(&self) -> Option<String> {
        let p = &self.probe;
        let why = if !p.driver_lib {
            "no NVIDIA driver here: libcuda.so.1 cannot be loaded".to_string()
        } else if p.gpus.is_empty() {
            format!(
                "the NVIDIA driver loads but reports no GPU{}",
                p.errors
                    .first()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            )
        } else if let Err(e) = &self.nccl {
            e.to_string()
        } else if !p.nccl_lib {
            "NCCL was found but does not load (check that it matches the driver's CUDA version)"
                .to_string()
        } else {
            return None;
        };
        Some(format!(
            "the nccl backend needs NVIDIA GPUs and NCCL: {why}.\n\
             Everything else works on this machine: the lessons, the ring animation, quizzes and \
             drills, `ringlab bench --backend tcp` and `ringlab sanity --backend tcp` (real \
             collectives between real processes over TCP, measured like nccl-tests), and the hang \
             lab (`ringlab lab run docker0`)."
        ))
    }

    /// A warning when more than one NCCL library is in reach: the ranks load the first, while
    /// PyTorch loads the one of its own wheel, so two programs on one machine may disagree.
    pub fn two_nccls(&self) -> Option<String> {
        if self.all_nccl.len() < 2 {
            return None;
        }
        let list: Vec<String> = self
            .all_nccl
            .iter()
            .map(|(p, how)| format!("{} ({how})", p.display()))
            .collect();
        Some(format!(
            "{} different NCCL libraries are in reach: {}. ringlab's ranks load the first; \
             PyTorch loads the one in its own nvidia-nccl wheel. Versions that differ behave \
             differently (retries, log lines, defaults): compare like with like, or choose one \
             with {}",
            self.all_nccl.len(),
            list.join("; "),
            find::OVERRIDE
        ))
    }
}

/// Look at this machine: find NCCL, then run `ringlab __gpu-probe` with it on the library
/// path. A probe that crashes or hangs (a broken driver) is reported, not fatal.
pub fn machine(load: LoadNccl) -> Machine {
    let nccl = find::find();
    let all_nccl = match std::env::var_os(find::OVERRIDE) {
        Some(_) => Vec::new(),
        None => find::all_in(&find::default_places()),
    };
    let mut m = Machine {
        probe: Probe::default(),
        nccl,
        all_nccl,
    };
    match run_probe(&m.rank_env(), load) {
        Ok(p) => m.probe = p,
        Err(e) => m.probe.errors.push(e.to_string()),
    }
    m
}

/// Why the GPU probe (a child process) said nothing usable.
#[derive(Debug, thiserror::Error)]
enum ProbeError {
    #[error("finding ringlab: {0}")]
    Exe(std::io::Error),
    #[error("starting the GPU probe: {0}")]
    Start(std::io::Error),
    #[error("the GPU probe did not finish in 60 s (a hung driver?)")]
    Hung,
    #[error("waiting for the GPU probe: {0}")]
    Wait(std::io::Error),
    #[error("reading the GPU probe: {0}")]
    Read(std::io::Error),
    /// Its exit status and the last line it wrote on stderr (or why its answer did not parse).
    #[error("the GPU probe failed ({status}): {last_line}")]
    Failed {
        status: std::process::ExitStatus,
        last_line: String,
    },
}

fn run_probe(env: &[(String, String)], load: LoadNccl) -> Result<Probe, ProbeError> {
    let exe = crate::lab::self_exe().map_err(ProbeError::Exe)?;
    let mut cmd = Command::new(exe);
    cmd.arg("__gpu-probe");
    if load == LoadNccl::Asked {
        cmd.arg("--nccl");
    }
    let mut child = cmd
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(ProbeError::Start)?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() > Duration::from_secs(60) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ProbeError::Hung);
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(ProbeError::Wait(e)),
        }
    }
    let out = child.wait_with_output().map_err(ProbeError::Read)?;
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).map_err(|e| ProbeError::Failed {
        status: out.status,
        last_line: String::from_utf8_lossy(&out.stderr)
            .lines()
            .last()
            .map_or_else(|| e.to_string(), str::to_string),
    })
}

/// `ringlab __gpu-probe [--nccl]`: print what the driver (and NCCL, if it may be loaded) say,
/// as JSON.
pub fn probe_main(nccl_asked: bool) -> std::process::ExitCode {
    let p = crate::comm::nccl::probe(nccl_asked);
    match serde_json::to_string(&p) {
        Ok(s) => {
            println!("{s}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::ExitCode::from(1)
        }
    }
}

/// The backend `--backend auto|tcp|nccl` resolves to, and a line saying which and why.
pub fn choose(
    asked: crate::lab::BackendChoice,
    m: &Machine,
) -> Result<(crate::lab::Backend, String), String> {
    use crate::lab::{Backend, BackendChoice};
    match asked {
        BackendChoice::Tcp => Ok((Backend::Tcp, "backend tcp (asked for)".into())),
        BackendChoice::Nccl => match m.nccl_unavailable() {
            Some(why) => Err(why),
            None => Ok((Backend::Nccl, nccl_line(m, "asked for"))),
        },
        BackendChoice::Auto => match m.nccl_unavailable() {
            None if m.gpus() >= 2 => Ok((Backend::Nccl, nccl_line(m, "auto: 2 or more GPUs"))),
            None => Ok((
                Backend::Tcp,
                format!(
                    "backend tcp (auto: only {} GPU; a collective needs 2 or more GPUs to move data between them; --backend nccl --ranks-per-gpu 2 runs two ranks on it)",
                    m.gpus()
                ),
            )),
            Some(why) => Ok((
                Backend::Tcp,
                format!(
                    "backend tcp (auto: {})",
                    why.lines()
                        .next()
                        .unwrap_or("no GPUs")
                        .trim_end_matches('.')
                ),
            )),
        },
    }
}

fn nccl_line(m: &Machine, why: &str) -> String {
    format!(
        "backend nccl ({why}): {} GPU(s), NCCL {} from {}",
        m.gpus(),
        m.probe.nccl_version.as_deref().unwrap_or("?"),
        m.nccl
            .as_ref()
            .map(|f| format!("{} ({})", f.lib.display(), f.how))
            .unwrap_or_default()
    )
}

/// NCCL_ALGO for `--algo` on `coll`, or None to let NCCL choose (what nccl-tests does).
/// Combinations NCCL would refuse at the first call ("No algorithm/protocol available",
/// ncclInvalidUsage) are refused here, before anything starts.
pub fn nccl_algo(
    coll: Collective,
    algo: Option<Algorithm>,
) -> Result<Option<&'static str>, AlgoError> {
    let Some(a) = algo else {
        return Ok(None);
    };
    if coll == Collective::SendRecv {
        return Err(AlgoError::PointToPoint(a.name()));
    }
    match a {
        Algorithm::Ring => Ok(Some("Ring")),
        Algorithm::Tree if coll == Collective::AllReduce => Ok(Some("Tree")),
        Algorithm::Tree => Err(AlgoError::TreeOnlyAllReduce(coll.name())),
        other => Err(AlgoError::NotNccls(other.name())),
    }
}

/// An `--algo` NCCL would refuse for a collective (the names are ringlab's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AlgoError {
    #[error(
        "--algo {0}: send/recv is point to point; NCCL has no algorithm to choose for it (leave --algo out)"
    )]
    PointToPoint(&'static str),
    #[error(
        "--algo tree: NCCL runs its tree only for all-reduce; {0} on NCCL_ALGO=Tree stops at the \
         first call with \"No algorithm/protocol available\" (ncclInvalidUsage). Use --algo ring, \
         or leave --algo out and let NCCL choose"
    )]
    TreeOnlyAllReduce(&'static str),
    #[error(
        "--algo {0}: NCCL has no such algorithm; use ring or tree (passed to NCCL as NCCL_ALGO), \
         or leave --algo out and let NCCL choose"
    )]
    NotNccls(&'static str),
}

/// What a caller asked of an NCCL launch, besides the job.
#[derive(Debug, Clone, Default)]
pub struct GpuAsk {
    /// `--ranks-per-gpu K`: K local ranks share each GPU.
    pub ranks_per_gpu: Option<usize>,
    /// `--algo`, if given.
    pub algo: Option<Algorithm>,
}

/// A prepared NCCL launch. Keep it until the job ends: it holds the machine (and with it
/// NCCL's private link folder).
#[derive(Debug)]
pub struct Prepared {
    pub machine: Machine,
    /// Lines to show before the run (shared GPU, one rank).
    pub notes: Vec<String>,
    /// Ranks per GPU where several share one (`--ranks-per-gpu` K > 1): the table says the
    /// bytes crossed host memory ([`SHARED_GPU`]).
    pub shared_gpu: Option<usize>,
    /// What the table's algorithm column says: NCCL's choice unless forced by `--algo` or
    /// by an NCCL_ALGO the ranks inherit (`NCCL_ALGO=…`).
    pub algo_label: NcclAlgo,
}

/// Ranks that must share each of `gpus` GPUs for `ranks` ranks on one machine (at least 1).
pub fn ranks_per_gpu_for(ranks: usize, gpus: usize) -> usize {
    ranks.div_ceil(gpus.max(1)).max(1)
}

/// The oldest NCCL ringlab drives (major, minor).
pub const MIN_NCCL: (u32, u32) = (2, 13);

/// What a table and the lab screen say about ranks that share a GPU.
pub const SHARED_GPU: &str = "shared GPU: the bytes cross NET/Socket through host memory and the ranks take turns on the GPU; this is not NVLink bandwidth";

/// Prepare `job` on `l` for NCCL on `m`: check GPUs against ranks (offering `--ranks-per-gpu`
/// where there are fewer GPUs than ranks), set the ranks' environment and the algorithm.
/// The one place the command line and the app do this.
pub fn prepare(
    job: &mut crate::lab::Job,
    l: &mut crate::lab::job::launch::Launch,
    m: Machine,
    ask: &GpuAsk,
) -> Result<Prepared, String> {
    if let Some(why) = m.nccl_unavailable() {
        return Err(why);
    }
    check_nccl_version(&m).map_err(|e| e.to_string())?;
    let gpus = m.gpus();
    let ranks_here = if job.devices > 0 {
        job.devices
    } else {
        l.nproc_per_node
    };
    let k = ask.ranks_per_gpu.unwrap_or(1).max(1);
    check_gpus(job, ranks_here, gpus, k, ask).map_err(|e| e.to_string())?;
    let mut notes = Vec::new();
    if k > 1 {
        notes.push(format!("{SHARED_GPU} ({k} ranks per GPU)"));
    }
    let world = if job.devices > 0 {
        job.devices
    } else {
        l.world()
    };
    // The sweep's buffers must fit the smallest GPU a rank lands on, K ranks sharing each.
    let smallest = m
        .probe
        .gpus
        .iter()
        .map(|g| g.memory_bytes)
        .filter(|&b| b > 0)
        .min()
        .unwrap_or(0);
    crate::lab::bench::check_gpu_memory(job, world, k, smallest).map_err(|e| e.to_string())?;
    if world == 1 {
        notes.push(
            "1 rank on 1 GPU: a one-rank collective moves no data between GPUs (the all-reduce \
             busbw factor 2(n-1)/n is 0 for n = 1); --ranks-per-gpu 2 --nproc-per-node 2 runs \
             two ranks on it"
                .into(),
        );
    }
    let forced = nccl_algo(job.coll, ask.algo).map_err(|e| e.to_string())?;
    // An NCCL_ALGO already in the environment reaches every rank: the table must not call
    // that NCCL's own choice.
    let inherited = std::env::var("NCCL_ALGO")
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty());
    if forced.is_none()
        && let Some(v) = &inherited
    {
        notes.push(format!(
            "NCCL_ALGO={v} is set in this environment and every rank inherits it: NCCL is not \
             choosing freely (unset it, or use --algo ring|tree)"
        ));
    }
    l.env.extend(m.rank_env());
    if let Some(a) = forced {
        l.env.push(("NCCL_ALGO".into(), a.into()));
    }
    job.ranks_per_gpu = k;
    // A rank's own watchdog gives up a little before the launcher's, so that the report is
    // the rank's (NCCL's state, the communicator aborted) rather than a bare kill.
    job.timeout_s = (l.timeout.as_secs() * 3 / 4).max(1);
    Ok(Prepared {
        machine: m,
        notes,
        shared_gpu: (k > 1).then_some(k),
        algo_label: algo_label(forced, inherited.as_deref()),
    })
}

/// Refuse an NCCL older than [`MIN_NCCL`].
fn check_nccl_version(m: &Machine) -> Result<(), GpuRefusal> {
    if let Some(v) = &m.probe.nccl_version {
        let n: Vec<u32> = v.split('.').map(|x| x.parse().unwrap_or(0)).collect();
        if n.len() >= 2 && (n[0], n[1]) < MIN_NCCL {
            return Err(GpuRefusal::OldNccl(v.clone()));
        }
    }
    Ok(())
}

/// Refuse `ranks_here` ranks on `gpus` GPUs at `k` per GPU where they do not fit, saying
/// what would (`--ranks-per-gpu`).
fn check_gpus(
    job: &crate::lab::Job,
    ranks_here: usize,
    gpus: usize,
    k: usize,
    ask: &GpuAsk,
) -> Result<(), GpuRefusal> {
    if job.devices > 0 && k > 1 {
        return Err(GpuRefusal::SharedInOneProcess);
    }
    if ranks_here > gpus * k {
        let need = ranks_per_gpu_for(ranks_here, gpus);
        return Err(match ask.ranks_per_gpu {
            None => GpuRefusal::OneGpuPerRank {
                ranks: ranks_here,
                gpus,
                need,
            },
            Some(k) => GpuRefusal::TooFewAtK {
                ranks: ranks_here,
                k,
                need,
                gpus,
            },
        });
    }
    Ok(())
}

/// An NCCL launch this machine cannot hold as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GpuRefusal {
    #[error(
        "NCCL {0} is older than {major}.{minor}, the oldest ringlab drives (ncclGetLastError, \
         ncclAvg and bfloat16 arrived by then); install a newer nvidia-nccl wheel or name one \
         with {var}",
        major = MIN_NCCL.0,
        minor = MIN_NCCL.1,
        var = find::OVERRIDE
    )]
    OldNccl(String),
    #[error(
        "--ranks-per-gpu needs one process per rank (each its own NCCL host); drop --single-process"
    )]
    SharedInOneProcess,
    #[error(
        "{ranks} ranks on NCCL need {ranks} GPUs (one per rank) and this node has {gpus}. NCCL \
         refuses two ranks on one GPU of one host (\"Duplicate GPU detected\"); to run {ranks} \
         ranks anyway, add --ranks-per-gpu {need}: each rank then counts as a host of its own \
         (NCCL_HOSTID), and the bytes cross NET/Socket through host memory while the ranks take \
         turns on the GPU. It proves NCCL works between ranks; it is not NVLink bandwidth"
    )]
    OneGpuPerRank {
        ranks: usize,
        gpus: usize,
        need: usize,
    },
    #[error(
        "{ranks} ranks with --ranks-per-gpu {k} need {need} GPU(s) at {k} per GPU; this node has \
         {gpus}: use --ranks-per-gpu {need}"
    )]
    TooFewAtK {
        ranks: usize,
        k: usize,
        need: usize,
        gpus: usize,
    },
}

/// The algorithm of an NCCL run: `--algo` (passed as NCCL_ALGO), an NCCL_ALGO the ranks
/// inherit, or NCCL's own choice. Its text is the table's and JSON's algorithm column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NcclAlgo {
    /// `--algo ring|tree`: NCCL's Ring or Tree.
    Forced(Forced),
    /// NCCL_ALGO as the ranks inherit it.
    Inherited(String),
    /// NCCL chooses per size.
    Choice,
}

/// The algorithms `--algo` can force on NCCL (NCCL_ALGO=Ring or Tree).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forced {
    Ring,
    Tree,
}

impl std::fmt::Display for NcclAlgo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NcclAlgo::Forced(Forced::Ring) => f.write_str("ring"),
            NcclAlgo::Forced(Forced::Tree) => f.write_str("tree"),
            NcclAlgo::Inherited(v) => write!(f, "NCCL_ALGO={v}"),
            NcclAlgo::Choice => f.write_str("nccl"),
        }
    }
}

/// The algorithm column of an NCCL run: `--algo` wins (it is passed as NCCL_ALGO), then an
/// NCCL_ALGO the ranks inherit, shown as such, else NCCL's own choice.
pub fn algo_label(forced: Option<&str>, inherited: Option<&str>) -> NcclAlgo {
    match (forced, inherited) {
        (Some("Tree"), _) => NcclAlgo::Forced(Forced::Tree),
        (Some(_), _) => NcclAlgo::Forced(Forced::Ring),
        (None, Some(v)) => NcclAlgo::Inherited(v.to_string()),
        (None, None) => NcclAlgo::Choice,
    }
}

/// The algorithm and protocol NCCL reports for a collective in its tuning log line
/// (NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS including TUNING; rank 0 only):
/// 2.24 and later `AllReduce: 1048576 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..15}`,
/// 2.23 `AllReduce: 1048576 Bytes -> Algo 1 proto 2 time 12.5`, 2.21–2.22 the same without the
/// collective's name. Returns (bytes, algorithm, protocol).
pub fn tuning_line(line: &str) -> Option<(u64, String, String)> {
    // The line's shape is nccl_log's to know; here only the names.
    let crate::nccl_log::Msg::Tuning {
        bytes, algo, proto, ..
    } = crate::nccl_log::parse_line(line)?.msg
    else {
        return None;
    };
    // Before 2.24 the names were numbers (src/include/devcomm.h).
    let algo = match algo.as_str() {
        "0" => "TREE",
        "1" => "RING",
        "2" => "COLLNET_DIRECT",
        "3" => "COLLNET_CHAIN",
        "4" => "NVLS",
        "5" => "NVLS_TREE",
        "6" => "PAT",
        a => a,
    };
    let proto = match proto.as_str() {
        "0" => "LL",
        "1" => "LL128",
        "2" => "SIMPLE",
        p => p,
    };
    Some((bytes, algo.to_string(), proto.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::job::launch::Launch;
    use crate::lab::{Backend, BackendChoice, Job, JobKind};

    fn no_gpu() -> Machine {
        Machine {
            probe: Probe::default(),
            nccl: Err(find::FindError::NotFound {
                searched: Vec::new(),
            }),
            all_nccl: Vec::new(),
        }
    }

    fn gpus(n: usize) -> Machine {
        let mut p = Probe {
            driver_lib: true,
            nccl_lib: true,
            nccl_version: Some("2.21.5".into()),
            ..Default::default()
        };
        for i in 0..n {
            p.gpus.push(crate::comm::nccl::Gpu {
                ordinal: i,
                name: "NVIDIA H200".into(),
                memory_bytes: 141 << 30,
                compute_capability: "9.0".into(),
            });
        }
        Machine {
            probe: p,
            nccl: Ok(Found {
                lib: "/usr/lib/libnccl.so.2".into(),
                dir: "/tmp/l".into(),
                linked: true,
                how: "system library directory".into(),
                private: None,
                held: None,
            }),
            all_nccl: vec![("/usr/lib/libnccl.so.2".into(), "system".into())],
        }
    }

    fn bench_job() -> Job {
        Job {
            kind: JobKind::Bench,
            backend: Backend::Nccl,
            ..Job::sanity()
        }
    }

    #[test]
    fn auto_falls_back_to_tcp_without_gpus_and_says_why() {
        let (b, why) = choose(BackendChoice::Auto, &no_gpu()).expect("auto never fails");
        assert_eq!(b, Backend::Tcp);
        assert!(why.contains("no NVIDIA driver"), "{why}");
        let e = choose(BackendChoice::Nccl, &no_gpu()).expect_err("nccl refuses");
        assert!(e.contains("Everything else works"), "{e}");
    }

    #[test]
    fn auto_takes_nccl_from_two_gpus_and_tcp_with_one() {
        assert_eq!(
            choose(BackendChoice::Auto, &gpus(2)).expect("ok").0,
            Backend::Nccl
        );
        let (b, why) = choose(BackendChoice::Auto, &gpus(1)).expect("ok");
        assert_eq!(b, Backend::Tcp);
        assert!(why.contains("only 1 GPU"), "{why}");
        assert!(why.contains("--ranks-per-gpu"), "{why}");
        assert_eq!(
            choose(BackendChoice::Nccl, &gpus(1)).expect("ok").0,
            Backend::Nccl
        );
        assert_eq!(
            choose(BackendChoice::Tcp, &gpus(8)).expect("ok").0,
            Backend::Tcp
        );
    }

    #[test]
    fn ranks_get_the_nccl_folder_first_and_nccls_warnings() {
        let env = gpus(2).rank_env();
        assert_eq!(env[0].0, "LD_LIBRARY_PATH");
        assert!(env[0].1.starts_with("/tmp/l:/usr/lib"), "{env:?}");
        if std::env::var_os("NCCL_DEBUG_FILE").is_none() {
            assert!(env.contains(&("NCCL_DEBUG_FILE".into(), "/dev/stderr".into())));
        }
        if std::env::var_os("NCCL_DEBUG").is_none() {
            assert!(env.contains(&("NCCL_DEBUG".into(), "WARN".into())));
        }
    }

    #[test]
    fn an_inherited_nccl_algo_is_shown_and_algo_wins_over_it() {
        let label = |f, i| algo_label(f, i).to_string();
        assert_eq!(label(None, None), "nccl");
        assert_eq!(label(None, Some("Tree")), "NCCL_ALGO=Tree");
        assert_eq!(label(None, Some("^nvls")), "NCCL_ALGO=^nvls");
        assert_eq!(label(Some("Ring"), Some("Tree")), "ring");
        assert_eq!(label(Some("Tree"), None), "tree");
    }

    #[test]
    fn more_ranks_than_gpus_offers_ranks_per_gpu_and_labels_the_run() {
        let mut l = Launch::single(2);
        let e = prepare(&mut bench_job(), &mut l, gpus(1), &GpuAsk::default())
            .expect_err("two ranks, one GPU");
        assert!(e.contains("--ranks-per-gpu 2"), "{e}");
        assert!(e.contains("Duplicate GPU"), "{e}");
        let mut job = bench_job();
        let mut l = Launch::single(2);
        let ask = GpuAsk {
            ranks_per_gpu: Some(2),
            algo: None,
        };
        let p = prepare(&mut job, &mut l, gpus(1), &ask).expect("shared");
        assert_eq!(job.ranks_per_gpu, 2);
        assert!(p.notes[0].starts_with(SHARED_GPU), "{:?}", p.notes);
        assert_eq!(p.algo_label, NcclAlgo::Choice, "NCCL chooses by default");
        assert!(
            !l.env.iter().any(|(k, _)| k == "NCCL_ALGO"),
            "NCCL_ALGO is not forced: {:?}",
            l.env
        );
        // Each rank its own host id; distinct across ranks.
        use crate::lab::job::launch::rank_env;
        let a = rank_env(&job, 0);
        let b = rank_env(&job, 1);
        assert_eq!(a[0].0, "NCCL_HOSTID");
        assert_ne!(a, b);
        assert!(
            rank_env(&bench_job(), 0).is_empty(),
            "one GPU per rank: none"
        );
        // Three ranks at 2 per GPU on one GPU do not fit.
        let mut l = Launch::single(3);
        let e = prepare(&mut bench_job(), &mut l, gpus(1), &ask).expect_err("3 > 2");
        assert!(e.contains("--ranks-per-gpu 3"), "{e}");
    }

    #[test]
    fn algorithms_nccl_would_refuse_are_refused_up_front() {
        use Collective::*;
        assert_eq!(nccl_algo(AllReduce, None), Ok(None));
        assert_eq!(
            nccl_algo(AllReduce, Some(Algorithm::Tree)),
            Ok(Some("Tree"))
        );
        assert_eq!(
            nccl_algo(AllGather, Some(Algorithm::Ring)),
            Ok(Some("Ring"))
        );
        for c in [AllGather, ReduceScatter, Broadcast, Reduce] {
            let e = nccl_algo(c, Some(Algorithm::Tree))
                .expect_err("tree")
                .to_string();
            assert!(e.contains("only for all-reduce"), "{e}");
        }
        assert!(nccl_algo(SendRecv, Some(Algorithm::Ring)).is_err());
        assert!(nccl_algo(AllReduce, Some(Algorithm::Naive)).is_err());
        let mut job = bench_job();
        job.coll = Broadcast;
        let ask = GpuAsk {
            ranks_per_gpu: None,
            algo: Some(Algorithm::Tree),
        };
        assert!(prepare(&mut job, &mut Launch::single(2), gpus(2), &ask).is_err());
    }

    #[test]
    fn an_nccl_older_than_2_13_is_refused_before_it_is_driven() {
        let mut m = gpus(2);
        m.probe.nccl_version = Some("2.12.12".into());
        let e = prepare(
            &mut bench_job(),
            &mut Launch::single(2),
            m,
            &GpuAsk::default(),
        )
        .expect_err("too old");
        assert!(e.contains("older than 2.13"), "{e}");
    }

    #[test]
    fn no_gpu_means_no_nccl_launch() {
        let e = prepare(
            &mut bench_job(),
            &mut Launch::single(2),
            no_gpu(),
            &GpuAsk::default(),
        )
        .expect_err("no GPU");
        assert!(e.contains("no NVIDIA driver"), "{e}");
    }

    #[test]
    fn two_nccl_libraries_in_reach_are_named() {
        let mut m = gpus(2);
        assert!(m.two_nccls().is_none());
        m.all_nccl.push((
            "/opt/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2".into(),
            "pip wheel".into(),
        ));
        let w = m.two_nccls().expect("two");
        assert!(w.contains("2 different NCCL libraries"), "{w}");
        assert!(w.contains("PyTorch"), "{w}");
    }

    #[test]
    fn nccls_tuning_lines_name_algorithm_and_protocol_in_every_version() {
        let new = "host:1:2 [0] NCCL INFO AllReduce: 1048576 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..15}";
        assert_eq!(
            tuning_line(new),
            Some((1048576, "RING".into(), "SIMPLE".into()))
        );
        let v223 = "host:1:2 [0] NCCL INFO AllGather: 4096 Bytes -> Algo 1 proto 0 time 9.5";
        assert_eq!(tuning_line(v223), Some((4096, "RING".into(), "LL".into())));
        let v221 = "host:1:2 [0] NCCL INFO 65536 Bytes -> Algo 0 proto 1 time 20.0";
        assert_eq!(
            tuning_line(v221),
            Some((65536, "TREE".into(), "LL128".into()))
        );
        assert_eq!(tuning_line("NCCL INFO Bootstrap: Using eth0"), None);
    }
}
