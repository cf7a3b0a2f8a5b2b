//! `ringlab doctor`: this machine as NCCL would see it (driver, GPUs, peer access, where NCCL
//! is and which version, the socket interfaces it would choose and why); exit 0.
//!
//! `ringlab doctor --log FILE...`: read real NCCL_DEBUG=INFO logs (one file per rank, or one
//! with several ranks interleaved) and name the known misconfigurations, each with the
//! `file:line` evidence it rests on and the fix, and say which NCCL release the lines' shapes
//! point to where they tell. Exit 0: nothing found; 1: findings; 2: a file could not be read.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::nccl_log::warnings::Severity;

use crate::lab::doctor::{
    Finding, HostTransports, ReleaseGuess, WarnLine, analyze_report, any_error, nccl_release,
    transports, transports_summary,
};

#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// NCCL_DEBUG=INFO (or TRACE) log files: one per rank, or one with ranks interleaved; a
    /// folder reads every file in it (a whole job's logs: Slurm's `%x-%j-%t.out`, saved
    /// `kubectl logs`), and a quoted pattern ('nccl-sanity-*.out') every file it matches.
    #[arg(long = "log", value_name = "FILE|DIR|GLOB", num_args = 1..)]
    pub logs: Vec<PathBuf>,
    /// Flight-recorder dumps, one per rank, or folders of them: ringlab's (`lab run` writes
    /// them on a run-time hang) or PyTorch's (`*.pkl`, `comm_lib_trace_rank_<r>`, or their
    /// JSON). Lines the ranks up by collective number and names the one that diverged.
    #[arg(long = "trace", value_name = "DIR|FILE", num_args = 1.., conflicts_with = "logs")]
    pub traces: Vec<PathBuf>,
    /// Bench outputs: nccl-tests' (`all_reduce_perf` … as printed, any release, a launcher's
    /// line prefixes allowed) or ringlab bench's table, `--csv` or `--json`. Says which rows
    /// fall short (#wrong, sizes that did not finish, a peak far under `--link`, dips, in-place
    /// vs out-of-place gaps) and what to check next.
    #[arg(long = "bench", value_name = "FILE", num_args = 1.., conflicts_with_all = ["logs", "traces"])]
    pub benches: Vec<PathBuf>,
    /// With --bench: the link the GPUs' traffic crosses (NVLink inside a node, each GPU's NIC
    /// across nodes), from the planner's table: nvlink, pcie, ib, ethernet, or a preset's name
    /// ("NVLink 4", "400G InfiniBand", …).
    #[arg(long, value_name = "LINK", requires = "benches")]
    pub link: Option<String>,
    /// Print the findings as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The files `--log` names: a file as given; a folder's regular files (not hidden, not
/// recursive); a pattern's matches (when no file has that name). Folders and patterns come
/// out in natural order (`task-2` before `task-10`), so ranks read in order. An empty folder
/// or a pattern that matches nothing is an error naming it.
pub fn log_paths(args: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for a in args {
        let text = a.to_string_lossy();
        let mut found: Vec<PathBuf> = if a.is_dir() {
            std::fs::read_dir(a)
                .map_err(|e| format!("{}: {e}", a.display()))?
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.is_file()
                        && !p
                            .file_name()
                            .is_some_and(|n| n.to_string_lossy().starts_with('.'))
                })
                .collect()
        } else if !a.exists() && text.contains(['*', '?', '[']) {
            glob::glob(&text)
                .map_err(|e| format!("--log {text}: not a pattern: {e}"))?
                .flatten()
                .filter(|p| p.is_file())
                .collect()
        } else {
            out.push(a.clone());
            continue;
        };
        if found.is_empty() {
            return Err(if a.is_dir() {
                format!("{}: a folder with no log files in it", a.display())
            } else {
                format!("--log {text}: no file matches")
            });
        }
        found.sort_by(|x, y| natural(&x.to_string_lossy(), &y.to_string_lossy()));
        out.extend(found);
    }
    Ok(out)
}

/// Compare with runs of digits as numbers: `r-2.out` before `r-10.out`.
fn natural(a: &str, b: &str) -> std::cmp::Ordering {
    fn parts(s: &str) -> Vec<(bool, &str)> {
        let mut v = Vec::new();
        let mut start = 0;
        let bytes = s.as_bytes();
        for i in 1..=bytes.len() {
            if i == bytes.len() || bytes[i].is_ascii_digit() != bytes[start].is_ascii_digit() {
                v.push((bytes[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        v
    }
    let (pa, pb) = (parts(a), parts(b));
    for ((da, xa), (db, xb)) in pa.iter().zip(&pb) {
        let o = if *da && *db {
            let (ta, tb) = (xa.trim_start_matches('0'), xb.trim_start_matches('0'));
            ta.len().cmp(&tb.len()).then(ta.cmp(tb))
        } else {
            xa.cmp(xb)
        };
        if o.is_ne() {
            return o;
        }
    }
    pa.len().cmp(&pb.len())
}

pub fn doctor(args: &DoctorArgs) -> anyhow::Result<ExitCode> {
    if !args.traces.is_empty() {
        return trace(args);
    }
    if !args.benches.is_empty() {
        return bench(args);
    }
    if args.logs.is_empty() {
        return machine(args.json);
    }
    let paths = match log_paths(&args.logs) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("ringlab doctor: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let mut files = Vec::with_capacity(paths.len());
    // The doctor holds about 13 bytes per byte of log: a budget across all files, not only per
    // file (finding L6). Files past it are skipped, each named.
    let mut total = 0u64;
    let mut skipped = Vec::new();
    for p in &paths {
        let len = std::fs::metadata(p).map_or(0, |m| m.len());
        if total + len > MAX_LOGS_TOTAL && !files.is_empty() {
            skipped.push(format!("{} ({} B)", p.display(), len));
            continue;
        }
        total += len;
        match read_log(p) {
            Ok(text) => files.push((p.display().to_string(), text)),
            Err(e) => {
                eprintln!("ringlab doctor: {e}");
                return Ok(ExitCode::from(2));
            }
        }
    }
    if !skipped.is_empty() {
        eprintln!(
            "ringlab doctor: note: read {} file(s), {total} B, up to the {} the doctor reads in \
             all; skipped {}: give it the ranks around the failure",
            files.len(),
            crate::units::format_bytes(MAX_LOGS_TOTAL),
            printable(&skipped.join(", "))
        );
    }
    let report = analyze_report(&files);
    if report.nccl_lines.iter().all(|&n| n == 0) {
        eprintln!(
            "ringlab doctor: no NCCL log line in {}: nothing to diagnose. Run the job with \
             NCCL_DEBUG=INFO (NCCL_DEBUG_FILE=/tmp/nccl.%h.%p.log keeps one file per process) \
             and give the doctor every rank's output",
            files
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return Ok(ExitCode::from(2));
    }
    let findings = &report.findings;
    let release = nccl_release(&files);
    let transports = transports(&files);
    if args.json {
        #[derive(serde::Serialize)]
        struct Out<'a> {
            files: Vec<&'a str>,
            nccl_release: Option<&'a ReleaseGuess>,
            /// Per host, the transports of the `Channel … via …` lines.
            transports: &'a [HostTransports],
            findings: &'a [Finding],
            /// Every WARN line, named through NCCL's message table (null: not in it).
            warnings: &'a [WarnLine],
        }
        let out = Out {
            files: files.iter().map(|(n, _)| n.as_str()).collect(),
            nccl_release: release.as_ref(),
            transports: &transports,
            findings,
            warnings: &report.warnings,
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!(
            "{}",
            render(&files, release.as_ref(), &transports, findings)
        );
    }
    Ok(if any_error(findings) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// What `doctor --log` reads across all its files (each file is also held to
/// [`crate::files::MAX_LOG_BYTES`]): at about 13 bytes held per byte, under 2 GB.
pub const MAX_LOGS_TOTAL: u64 = 128 << 20;

/// A log file's text: at most [`crate::files::MAX_LOG_BYTES`], and text. A file with NUL
/// bytes, or mostly bytes that are neither text nor UTF-8, is not a log (a core dump, a
/// compressed archive, a binary given by mistake): an error naming the file and the offset.
pub fn read_log(p: &std::path::Path) -> Result<String, LogError> {
    let bytes = crate::files::read_bounded(p, crate::files::MAX_LOG_BYTES, "NCCL log")
        .map_err(LogError::Read)?;
    let head = &bytes[..bytes.len().min(64 << 10)];
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let odd = head
        .iter()
        .filter(|&&b| b < 0x20 && !matches!(b, b'\n' | b'\r' | b'\t' | 0x1b))
        .count();
    let replaced = String::from_utf8_lossy(head).matches('\u{fffd}').count();
    if let Some(at) = head.iter().position(|&b| b == 0) {
        return Err(LogError::Binary {
            path: p.to_path_buf(),
            at,
        });
    }
    if !head.is_empty() && (odd + replaced) * 10 > head.len() {
        return Err(LogError::NotText {
            path: p.to_path_buf(),
            odd: odd + replaced,
            of: head.len(),
        });
    }
    Ok(text)
}

/// Why a file is not read as an NCCL log.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// Not read: missing, too big, not a regular file (the message names it).
    #[error("{0}")]
    Read(String),
    #[error(
        "{} is not a text log (a NUL byte at offset {at}: binary data, a core dump or a \
         compressed file); give the doctor the text NCCL wrote (zcat a .gz first)",
        path.display()
    )]
    Binary { path: std::path::PathBuf, at: usize },
    #[error(
        "{} is not a text log ({odd} of its first {of} bytes are control bytes or not UTF-8)",
        path.display()
    )]
    NotText {
        path: std::path::PathBuf,
        odd: usize,
        of: usize,
    },
}

pub use crate::cli::printable;

fn render(
    files: &[(String, String)],
    release: Option<&ReleaseGuess>,
    transports: &[HostTransports],
    findings: &[Finding],
) -> String {
    let mut s = String::new();
    let nccl_lines: usize = files
        .iter()
        .map(|(_, t)| t.lines().filter(|l| l.contains(" NCCL ")).count())
        .sum();
    if nccl_lines == 0 {
        s.push_str(
            "note: no NCCL log lines found; run the job with NCCL_DEBUG=INFO and keep every \
             rank's output\n",
        );
    }
    if let Some(r) = release {
        s.push_str(&format!("NCCL release: {}\n", printable(&r.summary)));
        for (file, line, text) in &r.evidence {
            s.push_str(&format!("  {file}:{line}: {}\n", printable(text)));
        }
    }
    let per_host = transports_summary(transports);
    if !per_host.is_empty() {
        s.push_str("Transports (Channel … via … lines):\n");
        for line in per_host {
            s.push_str(&format!("  {}\n", printable(&line)));
        }
    }
    if findings.is_empty() {
        s.push_str("no known misconfiguration found\n");
        return s;
    }
    let errors = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    s.push_str(&format!(
        "{} finding(s): {errors} error(s), {} note(s)\n",
        findings.len(),
        findings.len() - errors
    ));
    for f in findings {
        let note = if f.severity == Severity::Note {
            ", note"
        } else {
            ""
        };
        s.push_str(&format!("\n[{}{note}] {}\n", f.kind, printable(&f.summary)));
        for (file, line, text) in &f.evidence {
            s.push_str(&format!("  {file}:{line}: {}\n", printable(text)));
        }
        for m in &f.messages {
            s.push_str(&format!(
                "  NCCL's message: \"{}\" ({}; printed by {}{})\n",
                printable(&m.format),
                m.family,
                m.releases,
                m.site
                    .as_ref()
                    .map(|x| format!(", {x}"))
                    .unwrap_or_default()
            ));
        }
        s.push_str(&format!("  fix: {}\n", f.fix));
        if let Some(c) = &f.confirm {
            s.push_str(&format!("  confirm: {c}\n"));
        }
    }
    s
}

/// What NCCL would find on this machine.
#[derive(Debug, serde::Serialize)]
struct MachineReport {
    probe: crate::comm::nccl::Probe,
    nccl_found: Option<String>,
    nccl_linked_in: Option<String>,
    nccl_error: Option<String>,
    /// Every NCCL library in reach, and a warning when there is more than one.
    nccl_all: Vec<String>,
    nccl_warning: Option<String>,
    interfaces: Vec<(String, String)>,
    nccl_socket_ifname: Option<String>,
    socket_choice: Result<(String, String), String>,
    infiniband: Vec<String>,
    nccl_backend: Result<(), String>,
}

fn machine(json: bool) -> anyhow::Result<ExitCode> {
    use crate::comm::cpu::ifaces;
    let m = crate::lab::bench::gpu::machine(crate::lab::bench::gpu::LoadNccl::Asked);
    let all = ifaces::list().unwrap_or_default();
    let spec = std::env::var("NCCL_SOCKET_IFNAME").ok();
    let socket_choice = ifaces::select(&all, spec.as_deref())
        .map(|(v, why)| (v[0].to_string(), why))
        .map_err(|e| e.to_string());
    let mut infiniband: Vec<String> = std::fs::read_dir("/sys/class/infiniband")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    infiniband.sort();
    let r = MachineReport {
        probe: m.probe.clone(),
        nccl_found: m
            .nccl
            .as_ref()
            .ok()
            .map(|f| format!("{} ({})", f.lib.display(), f.how)),
        nccl_linked_in: m
            .nccl
            .as_ref()
            .ok()
            .filter(|f| f.linked)
            .map(|f| f.dir.display().to_string()),
        nccl_error: m.nccl.as_ref().err().map(ToString::to_string),
        nccl_all: m
            .all_nccl
            .iter()
            .map(|(p, how)| format!("{} ({how})", p.display()))
            .collect(),
        nccl_warning: m.two_nccls(),
        interfaces: all
            .iter()
            .map(|i| (i.name.clone(), i.addr.to_string()))
            .collect(),
        nccl_socket_ifname: spec,
        socket_choice,
        infiniband,
        nccl_backend: m.nccl_unavailable().map_or(Ok(()), Err),
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", render_machine(&r));
    }
    Ok(machine_exit(&r))
}

/// 1 where a machine with an NVIDIA driver cannot run the nccl backend (no GPU reported,
/// NCCL missing or not loading): something to fix, as a log with findings exits 1 (L4). A
/// machine without a driver is not broken: NCCL is simply not for it (0).
fn machine_exit(r: &MachineReport) -> ExitCode {
    if r.probe.driver_lib && r.nccl_backend.is_err() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn render_machine(r: &MachineReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let p = &r.probe;
    gpus_section(&mut s, p);
    nccl_section(&mut s, r);
    network_section(&mut s, r);
    let _ = writeln!(s, "== What runs here");
    match &r.nccl_backend {
        Ok(()) => {
            let _ = writeln!(
                s,
                "  the nccl backend: `ringlab sanity --backend nccl`, `ringlab bench --backend nccl`{}",
                if p.gpus.len() < 2 {
                    " (one GPU: a one-rank collective moves no data between GPUs)"
                } else {
                    ""
                }
            );
            let _ = writeln!(
                s,
                "  and everything else: lessons, quizzes, the TCP labs, the hang lab"
            );
        }
        Err(e) => {
            for l in e.lines() {
                let _ = writeln!(s, "  {l}");
            }
        }
    }
    s
}

/// `== GPUs`: the driver, each GPU, peer access between them, the probe's errors.
fn gpus_section(s: &mut String, p: &crate::comm::nccl::Probe) {
    use std::fmt::Write;
    let _ = writeln!(s, "== GPUs");
    if !p.driver_lib {
        let _ = writeln!(
            s,
            "  NVIDIA driver: not found (libcuda.so.1 cannot be loaded)"
        );
    } else {
        let _ = writeln!(
            s,
            "  NVIDIA driver: loaded, supports CUDA {}",
            p.driver_version.as_deref().unwrap_or("?")
        );
        if p.gpus.is_empty() {
            let _ = writeln!(
                s,
                "  no GPU visible (check CUDA_VISIBLE_DEVICES and nvidia-smi)"
            );
        }
        for g in &p.gpus {
            let _ = writeln!(
                s,
                "  GPU {}: {}, {:.0} GiB, compute capability {}",
                g.ordinal,
                g.name,
                g.memory_bytes as f64 / (1u64 << 30) as f64,
                g.compute_capability
            );
        }
        for (i, j, ok) in &p.peer_access {
            if i < j {
                let _ = writeln!(
                    s,
                    "  peer access GPU {i} -> GPU {j}: {}",
                    if *ok {
                        "yes (NVLink or PCIe P2P: NCCL can use its P2P transport)"
                    } else {
                        "no (NCCL goes through host memory: SHM)"
                    }
                );
            }
        }
    }
    for e in &p.errors {
        let _ = writeln!(s, "  ! {e}");
    }
}

/// `== NCCL`: where the library was found and which version loaded.
fn nccl_section(s: &mut String, r: &MachineReport) {
    use std::fmt::Write;
    let p = &r.probe;
    let _ = writeln!(s, "== NCCL");
    match (&r.nccl_found, &r.nccl_error) {
        (Some(f), _) => {
            let _ = writeln!(s, "  found: {f}");
            if let Some(d) = &r.nccl_linked_in {
                let _ = writeln!(
                    s,
                    "  each run opens it once, checks the open file and gives the ranks that descriptor: a private folder's libnccl.so links to it, first on their LD_LIBRARY_PATH (this one: {d}, removed on exit)"
                );
            }
            match &p.nccl_version {
                Some(v) => {
                    let _ = writeln!(
                        s,
                        "  version {v} (ncclGetVersion, loaded as a rank loads it)"
                    );
                }
                None => {
                    let _ = writeln!(s, "  ! it did not load in the probe");
                }
            }
        }
        (None, Some(e)) => {
            let _ = writeln!(s, "  {e}");
        }
        (None, None) => {}
    }
    if let Some(w) = &r.nccl_warning {
        let _ = writeln!(s, "  ! {w}");
    }
}

/// `== Network`: the interfaces, NCCL's choice among them, InfiniBand.
fn network_section(s: &mut String, r: &MachineReport) {
    use std::fmt::Write;
    let _ = writeln!(s, "== Network (NCCL's socket transport and bootstrap)");
    for (n, a) in &r.interfaces {
        let _ = writeln!(s, "  {n:<10} {a}");
    }
    match &r.socket_choice {
        Ok((i, why)) => {
            let _ = writeln!(s, "  NCCL would use {i}: {why}");
        }
        Err(e) => {
            let _ = writeln!(s, "  ! {e}");
        }
    }
    if r.infiniband.is_empty() {
        let _ = writeln!(
            s,
            "  InfiniBand: none (/sys/class/infiniband is empty): NCCL uses sockets between nodes"
        );
    } else {
        let _ = writeln!(s, "  InfiniBand devices: {}", r.infiniband.join(", "));
    }
}

/// `doctor --trace`: the flight recorders lined up. Exit 0 when the dumps blame nobody, 1 when
/// they name a rank, 2 when they cannot be read.
fn trace(args: &DoctorArgs) -> anyhow::Result<ExitCode> {
    use crate::lab::hang::trace;
    let traces = match trace::read_paths(&args.traces) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("ringlab doctor: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let a = trace::analyse(&traces);
    let timing = trace::timing(&traces);
    let straggler = trace::straggler(&timing);
    let table: Vec<String> = trace::table(&traces, &a, 8)
        .into_iter()
        .map(|r| r.text)
        .collect();
    if args.json {
        #[derive(serde::Serialize)]
        struct Out<'a> {
            files: Vec<&'a str>,
            #[serde(flatten)]
            analysis: &'a trace::Analysis,
            table: &'a [String],
            /// Per rank, over the collectives every rank completed.
            timing: &'a [trace::RankTiming],
            straggler: Option<&'a trace::Straggler>,
        }
        let out = Out {
            files: traces.iter().map(|t| t.source.as_str()).collect(),
            analysis: &a,
            table: &table,
            timing: &timing,
            straggler: straggler.as_ref(),
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        // Dumps are files others may have written: what they say is shown, never obeyed.
        println!("Flight recorders: {} rank(s) of {}", traces.len(), a.world);
        for t in &traces {
            println!(
                "  rank {}: {} ({} collective(s), {})",
                t.rank,
                printable(&t.source),
                t.entries.len(),
                printable(&t.format)
            );
        }
        println!(
            "\nLined up by collective number (✓ completed, … in flight, · scheduled, — never entered):"
        );
        for row in &table {
            println!("{}", printable(row));
        }
        print!("{}", timing_lines(&timing, straggler.as_ref()));
        match &a.culprit {
            Some(c) => println!(
                "\nCulprit: rank {}{}\n  {}",
                c.rank(),
                c.seq()
                    .map(|s| format!(", collective #{s}"))
                    .unwrap_or_default(),
                printable(&a.explanation)
            ),
            None => println!("\nNo rank diverged: {}", printable(&a.explanation)),
        }
    }
    Ok(if a.culprit.is_some() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `doctor --bench`: each file read, judged against `--link`, and reported; exit 1 when a row
/// is wrong, failed or far short of the link, 2 when a file or the link cannot be read.
fn bench(args: &DoctorArgs) -> anyhow::Result<ExitCode> {
    use crate::lab::doctor::bench;
    let link = match args.link.as_deref().map(crate::infer::plan::find_link) {
        None => None,
        Some(Ok(i)) => Some(crate::collective::cost::LINK_PRESETS[i]),
        Some(Err(e)) => {
            eprintln!("ringlab doctor: --link: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let mut files = Vec::new();
    for p in &args.benches {
        let read = read_log(p).map_err(anyhow::Error::msg).and_then(|text| {
            bench::read(&p.display().to_string(), &text).map_err(anyhow::Error::from)
        });
        match read {
            Ok(f) => files.push(f),
            Err(e) => {
                eprintln!("ringlab doctor: {e}");
                return Ok(ExitCode::from(2));
            }
        }
    }
    let judged: Vec<(bench::BenchFile, Vec<bench::Finding>)> = files
        .into_iter()
        .map(|f| {
            let found = bench::findings(&f, link.as_ref());
            (f, found)
        })
        .collect();
    if args.json {
        let out: Vec<serde_json::Value> = judged
            .iter()
            .map(|(f, found)| serde_json::json!({"file": f, "findings": found}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for (f, found) in &judged {
            print!("{}", bench::render(f, link.as_ref(), found));
        }
    }
    let failed = judged
        .iter()
        .flat_map(|(_, found)| found)
        .any(|f| f.severity() == bench::Severity::Error);
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `doctor --trace`'s time per rank: inside the collectives and between them, and the
/// straggler if there is one. Nothing where no collective completed on every rank.
fn timing_lines(
    timing: &[crate::lab::hang::trace::RankTiming],
    straggler: Option<&crate::lab::hang::trace::Straggler>,
) -> String {
    let Some(n) = timing
        .iter()
        .map(|t| t.collectives)
        .max()
        .filter(|&n| n > 0)
    else {
        return String::new();
    };
    let mut s = format!(
        "\nTime per rank over the {n} collective(s) every rank completed (inside: start to \
         completion; between: the rank's own work):\n"
    );
    for t in timing {
        s += &format!(
            "  rank {:>3}  inside {:>10.1} ms  between {:>10.1} ms\n",
            t.rank,
            t.inside_ns as f64 / 1e6,
            t.between_ns as f64 / 1e6
        );
    }
    if let Some(st) = straggler {
        s += &format!("Straggler: {}\n", st.explain());
    }
    s
}

#[cfg(test)]
mod log_path_tests {
    use super::natural;

    #[test]
    fn task_numbers_sort_as_numbers() {
        let mut v = vec!["j-7-10.out", "j-7-2.out", "j-7-1.out", "a.log"];
        v.sort_by(|a, b| natural(a, b));
        assert_eq!(v, ["a.log", "j-7-1.out", "j-7-2.out", "j-7-10.out"]);
    }
}
