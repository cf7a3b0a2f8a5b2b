//! The command line: `ringlab [learn|check|ring|export|completions]`.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use crate::collective::{Algorithm, Collective, Dtype, Schedule, report};
use crate::course::Course;
use crate::course::check::check_all;
use crate::course::lesson::{
    LoadError, SourceFile, read_dir_sources, read_drill_sources, read_source,
};
use crate::study::progress;
use crate::tui::screens::ring::RingParams;
use crate::tui::{self, App, TuiError, theme::Theme};
use crate::units::parse_size;

pub mod doctor;
pub mod export;
pub mod lab;
pub mod plan;
pub mod present;
pub mod study;

#[derive(Debug, Parser)]
#[command(
    name = "ringlab",
    version,
    about = "Learn how GPUs communicate: NCCL collectives, ring all-reduce, TP/PP, hang debugging",
    long_about = "ringlab teaches how GPUs communicate (NCCL collectives, ring all-reduce, tensor and \
pipeline parallelism, launching them in vLLM, debugging multi-GPU hangs) and proves each lesson live.\n\n\
Run with no command to open the course map.",
    after_help = "Authors: --lessons DIR (before or after any command that reads the course) loads \
lessons from DIR instead of the built-in course; R reloads them.\n\nEnvironment:\n  \
RINGLAB_LESSONS  lessons folder (same as --lessons)\n  \
RINGLAB_HOME     where progress is kept (default: $XDG_DATA_HOME/ringlab)\n  \
NO_COLOR         monochrome theme"
)]
pub struct Cli {
    /// Load lessons from this folder instead of the built-in course (for authors; `R` reloads).
    /// Hidden from every command's option list (the labs, bench and doctor read no lessons);
    /// `ringlab --help` names it.
    #[arg(
        long,
        global = true,
        env = "RINGLAB_LESSONS",
        value_name = "DIR",
        hide = true
    )]
    pub lessons: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Open a lesson by id (or the course map without one); q then returns to the shell, as
    /// from `ring` and `drill`.
    Learn {
        /// Lesson id, e.g. `collectives`.
        lesson: Option<String>,
        /// Follow a track and list its steps with their minutes: `course` (every lesson and its
        /// quiz) or `interview` (about 2 hours of what matters most). The course map's "Next:"
        /// follows it from then on.
        #[arg(long, value_enum, conflicts_with = "lesson")]
        track: Option<crate::study::track::TrackId>,
    },
    /// Validate lessons: front matter, ids, prerequisites, fenced blocks, links, math.
    ///
    /// Prints every problem as `file:line:col: error: message` and exits 1 if there is any.
    Check {
        /// Lesson files or folders (default: the course that `ringlab` would open).
        paths: Vec<PathBuf>,
    },
    /// Watch a collective step by step (or print its schedule with --json).
    ///
    /// Opens the ring view: Space plays, ← and → step back and forward, + and − change the
    /// number of ranks, a/c/m cycle algorithm, collective and message size.
    Ring(RingArgs),
    /// Present a lesson to a class: slides, narrated ring views, class quizzes, live labs.
    ///
    /// One section a slide, fitted to the terminal; PgDn/PgUp, →/← and Space (what a
    /// presentation clicker sends) move, `b` blanks the screen, Enter runs the slide's live
    /// block. `--notes` in a second terminal follows the slides with what to say;
    /// `--record talk.cast` saves the whole presentation for asciinema's player or `agg`.
    Present(present::PresentArgs),
    /// Tensor-parallel calculator: bytes and time of TP's all-reduces for a model.
    ///
    /// Two all-reduces per layer, every forward pass; per-GPU bytes come from the ring
    /// all-reduce schedule. Exits 1 when vLLM would refuse the TP degree.
    Tp(plan::TpArgs),
    /// vLLM launch planner: TP and PP for a cluster, a memory check, commands for every node.
    ///
    /// Exits 1 when the plan cannot work (the model won't fit, an interface cannot reach peers).
    Plan(plan::PlanArgs),
    /// Benchmark a collective between real processes over TCP, measured like nccl-tests.
    ///
    /// Example: ringlab bench --nproc-per-node 2 -b 1K -e 64M -f 4
    Bench(lab::BenchArgs),
    /// The classic NCCL sanity check: an all-reduce of ones must equal the world size.
    Sanity(lab::SanityArgs),
    /// This machine's report (GPUs, NCCL, interfaces), or NCCL logs and flight recorders read
    /// for known misconfigurations, with evidence and fixes.
    ///
    /// `ringlab doctor` alone reports the machine: the GPUs and driver, the NCCL a rank would
    /// load (and any other in reach), the network interfaces and what NCCL_SOCKET_IFNAME would
    /// pick. `--log node0.log node1.log` reads NCCL_DEBUG=INFO logs; `--trace DIR` lines up
    /// flight recorders. Exits 0 when nothing is found, 1 on findings, 2 when a file cannot be
    /// read.
    Doctor(doctor::DoctorArgs),
    /// Files to take to a real cluster, e.g. `export sanity-script --out nccl_sanity.py`.
    Export {
        #[command(subcommand)]
        what: export::ExportWhat,
    },
    /// Quiz yourself on a lesson: typed answers graded at once, missed items come back.
    ///
    /// Without a terminal, `--list` prints the items (`--json`; answers only with `--answers`).
    Quiz(study::QuizArgs),
    /// Spaced-repetition drills across the course and the interview questions (FSRS).
    ///
    /// `--mock` runs a mock interview that chains follow-ups; `--timer 60` gives each answer a
    /// countdown; `--minutes 15` ends the session after 15 minutes.
    Drill(study::DrillArgs),
    /// Study stats: streak, what is due over the next 7 days, mastery per lesson.
    Stats(study::StatsArgs),
    /// Export your progress to a file, or merge one in (the newer review wins per item).
    Progress {
        #[command(subcommand)]
        command: study::ProgressCommand,
    },
    /// (internal) save progress in a loop until killed; the durability test uses it.
    #[command(name = "__progress-stress", hide = true)]
    ProgressStress {
        dir: PathBuf,
        #[arg(long)]
        iterations: Option<u64>,
    },
    /// The hang lab: jobs that hang or fail (NIC misconfigurations at start-up, run-time hangs in
    /// a training loop) or run slowly (a degraded link, the wrong NIC, a straggler), staged on a
    /// virtual cluster of network namespaces.
    #[command(subcommand)]
    Lab(lab::HangLab),
    /// (internal) holds one network namespace of the hang lab's virtual cluster.
    #[command(name = "__netns-holder", hide = true)]
    NetnsHolder {
        /// Also a /dev/shm of its own of this size (a container's).
        #[arg(long)]
        shm: Option<String>,
        /// Also a UTS namespace of its own with this host name (a node's).
        #[arg(long)]
        hostname: Option<String>,
    },
    /// (internal) what the CUDA driver and NCCL say about this machine, as JSON.
    #[command(name = "__gpu-probe", hide = true)]
    GpuProbe {
        /// Load NCCL even without a GPU (the user asked: doctor, --backend nccl).
        #[arg(long)]
        nccl: bool,
    },
    /// (internal) one rank of a job, started by the launcher.
    #[command(name = "__rank", hide = true)]
    Rank,
    /// (internal) the loopback ceiling: two processes streaming both ways.
    #[command(name = "__loopback", hide = true)]
    Loopback(lab::LoopbackArgs),
    /// Print shell completions.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, clap::Args)]
pub struct RingArgs {
    /// Number of ranks N (drawn up to 16; numbers exact up to 1024).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub ranks: u64,
    /// Message size M per rank: 1003, 1e6, 4K, 1MiB, 1MB (MB = 10^6; MiB and bare K/M/G are powers of 1024).
    #[arg(long, default_value = "1MiB", value_parser = parse_size)]
    pub bytes: u64,
    /// Element type: u8 i8 i32 u32 i64 u64 f16 bf16 f32 f64 (nccl-tests names work too).
    #[arg(long, default_value = "f32")]
    pub dtype: Dtype,
    /// Algorithm: ring, naive, tree, double-tree (NCCL's pair of trees, pipelined;
    /// all-reduce only) or two-level (a hierarchical all-reduce over nodes × GPUs, as in Horovod
    /// and BlueConnect: not an NCCL algorithm; all-reduce only) or recursive-doubling (log2 N
    /// whole-buffer exchanges, MPI's short-message all-reduce: not an NCCL algorithm;
    /// all-reduce only) [default: ring]. Not for all-to-all and sendrecv, which have one
    /// schedule.
    #[arg(long)]
    pub algo: Option<Algorithm>,
    /// Collective: all-reduce, reduce-scatter, all-gather, broadcast, reduce, sendrecv,
    /// all-to-all [default: all-reduce].
    #[arg(long, value_name = "COLLECTIVE")]
    pub coll: Option<Collective>,
    /// Deprecated: the collective is --coll (in `bench`, --op is the reduction).
    #[arg(long, hide = true, value_name = "COLLECTIVE", conflicts_with = "coll")]
    pub op: Option<Collective>,
    /// Root rank for broadcast and reduce.
    #[arg(long, default_value_t = 0)]
    pub root: usize,
    /// GPUs per node: the node shape of the two-level all-reduce and of the "nodes" link
    /// choice (must divide --ranks) [default: N/p nodes' worth, p = N's smallest prime factor:
    /// 8 → 2 × 4, 9 → 3 × 3, a prime N → N × 1].
    #[arg(long, value_name = "G", value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub gpus_per_node: Option<u64>,
    /// Print the schedule and its byte counts as JSON instead of opening the screen.
    #[arg(long)]
    pub json: bool,
}

impl RingArgs {
    pub fn params(&self) -> RingParams {
        RingParams {
            coll: self.coll.or(self.op).unwrap_or(Collective::AllReduce),
            algo: self.algo.unwrap_or(Algorithm::Ring),
            ranks: self.ranks as usize,
            bytes: self.bytes,
            dtype: self.dtype,
            root: self.root,
            gpus_per_node: self.gpus_per_node.unwrap_or(0) as usize,
        }
    }
}

/// Exit codes: 0 fine, 1 content errors, 2 usage or environment problems.
/// The exit status of a command whose reader went away (`ringlab … | head`), as a shell
/// reports a process ended by SIGPIPE.
pub const BROKEN_PIPE_EXIT: u8 = 141;

/// A closed stdout or stderr (`… 2>&1 | head`) ends ringlab quietly, like a well-behaved
/// command-line tool, instead of a panic: Rust ignores SIGPIPE, so a write there fails, and
/// `println!`/`eprintln!` panic on that failure. The rank processes and the store keep
/// SIGPIPE ignored (a peer that vanishes is an error they report, not a signal that kills them).
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let p = info.payload();
        let msg = p
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| p.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to") && msg.contains("Broken pipe") {
            std::process::exit(i32::from(BROKEN_PIPE_EXIT));
        }
        default(info)
    }));
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
            // `ring --json | head -c 10`: serde_json wraps the write's error.
            || c.downcast_ref::<serde_json::Error>()
                .and_then(serde_json::Error::io_error_kind)
                == Some(io::ErrorKind::BrokenPipe)
    })
}

pub fn main() -> ExitCode {
    quiet_on_broken_pipe();
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::from(BROKEN_PIPE_EXIT),
        Err(e) => {
            let _ = writeln!(io::stderr(), "ringlab: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        None => open_tui(&cli.lessons, None),
        Some(Command::Learn {
            track: Some(track), ..
        }) => open_track(&cli.lessons, track),
        Some(Command::Learn { ref lesson, .. }) => open_tui(&cli.lessons, lesson.as_deref()),
        Some(Command::Check { ref paths }) => check(&cli.lessons, paths),
        Some(Command::Ring(ref args)) => ring(&cli.lessons, args),
        Some(Command::Present(ref args)) => present::present(&cli.lessons, args),
        Some(Command::Tp(ref args)) => plan::tp(args),
        Some(Command::Plan(ref args)) => plan::plan_cmd(args),
        Some(Command::Bench(ref args)) => {
            // The launcher's own NCCL-style log: the store's dropped connections, at WARN.
            crate::comm::emu::log::init(0);
            lab::bench(args)
        }
        Some(Command::Sanity(ref args)) => {
            crate::comm::emu::log::init(0);
            lab::sanity(args)
        }
        Some(Command::Rank) => Ok(crate::lab::bench::rank::main(
            crate::lab::hang::train::run_job,
        )),
        Some(Command::NetnsHolder { shm, hostname }) => Ok(crate::lab::hang::cluster::holder_main(
            shm.as_deref(),
            hostname.as_deref(),
        )),
        Some(Command::GpuProbe { nccl }) => Ok(crate::lab::bench::gpu::probe_main(nccl)),
        Some(Command::Lab(ref cmd)) => lab::hang_lab(cmd),
        Some(Command::Doctor(ref args)) => doctor::doctor(args),
        Some(Command::Export { ref what }) => export::export(what),
        Some(Command::Quiz(ref args)) => study::quiz_cmd(&cli.lessons, args),
        Some(Command::Drill(ref args)) => study::drill_cmd(&cli.lessons, args),
        Some(Command::Stats(ref args)) => study::stats_cmd(&cli.lessons, args),
        Some(Command::Progress { ref command }) => study::progress_cmd(command),
        Some(Command::ProgressStress {
            ref dir,
            iterations,
        }) => study::progress_stress(dir, iterations),
        Some(Command::Loopback(ref args)) => lab::loopback(args),
        Some(Command::Completions { shell }) => {
            let mut cmd = visible(&Cli::command());
            // Into memory first: clap_complete panics on a failed write (`| head`); a failed
            // write of the buffer is an error `main` reads as a closed pipe.
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut cmd, "ringlab", &mut buf);
            let mut out = io::stdout().lock();
            out.write_all(&buf)?;
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

pub fn load_course(lessons: &Option<PathBuf>) -> Result<Course, LoadError> {
    match lessons {
        Some(dir) => Course::from_dir(dir),
        None => Ok(Course::embedded()),
    }
}

/// The app with the course and the learner's progress loaded.
/// `c` without its hidden subcommands and arguments (the internal `__rank`, `--events`, …), for
/// shell completions: clap_complete offers hidden ones otherwise.
fn visible(c: &clap::Command) -> clap::Command {
    let mut out = clap::Command::new(c.get_name().to_string());
    if let Some(about) = c.get_about() {
        out = out.about(about.clone());
    }
    if let Some(v) = c.get_version() {
        out = out.version(v.to_string());
    }
    for a in c.get_visible_aliases() {
        out = out.visible_alias(a.to_string());
    }
    for a in c.get_arguments().filter(|a| !a.is_hide_set()) {
        out = out.arg(a.clone());
    }
    for s in c.get_subcommands().filter(|s| !s.is_hide_set()) {
        out = out.subcommand(visible(s));
    }
    out
}

fn new_app(lessons: &Option<PathBuf>) -> anyhow::Result<App> {
    // Code is drawn plain for the first frames while highlighting loads on a thread.
    crate::tui::markdown::defer_highlighting();
    let course = load_course(lessons)?;
    let mut app = App::new(course, Theme::from_env());
    app.read_wpm = crate::study::reading::wpm_from_env().map_err(anyhow::Error::msg)?;
    let dir = progress::data_dir();
    match progress::load(&dir) {
        Ok((p, notice)) => {
            app.progress = p;
            app.progress_dir = Some(dir);
            if let Some(n) = notice {
                // On screen until a key dismisses it (a resize keeps it), and in `m`.
                app.set_notice(n.to_string());
                eprintln!("ringlab: {n}");
            }
        }
        // Unreadable progress (permissions, say): run without saving rather than clobber it.
        Err(e) => app.set_notice(format!("{e}; progress will not be saved this session")),
    }
    Ok(app)
}

fn open_tui(lessons: &Option<PathBuf>, lesson: Option<&str>) -> anyhow::Result<ExitCode> {
    let mut app = new_app(lessons)?;
    if let Some(id) = lesson {
        if let Err(known) = app.open_lesson(id) {
            anyhow::bail!("no lesson `{id}`; known lessons: {}", known.join(", "));
        }
        // Like `ring`, `drill` and `quiz`: q in the screen a command opened goes back to the
        // shell it came from (links and searches still open other lessons above it).
        app.launched_here();
    }
    run_tui(app)
}

/// `learn --track T`: follow the track (saved at once) and show its steps over the course map.
fn open_track(
    lessons: &Option<PathBuf>,
    track: crate::study::track::TrackId,
) -> anyhow::Result<ExitCode> {
    let mut app = new_app(lessons)?;
    app.progress.track = Some(track);
    app.save_progress();
    let screen = crate::tui::screens::track::TrackState::new(&app);
    app.stack.push(screen.into());
    run_tui(app)
}

fn run_tui(app: App) -> anyhow::Result<ExitCode> {
    match tui::run(app) {
        Ok(exit) => Ok(ExitCode::from(exit.status())),
        Err(e @ TuiError::NotATerminal) => {
            eprintln!("ringlab: {e}");
            Ok(ExitCode::from(2))
        }
        Err(e) => Err(e.into()),
    }
}

/// Is `p` hang-lab scenarios: a `.toml` file, a folder of them (and no lessons), or the word
/// `labs` where no such folder is (the built-in scenarios)?
fn is_lab_path(p: &Path) -> bool {
    if p.extension().is_some_and(|x| x == "toml") {
        return true;
    }
    if p.is_dir() {
        let names: Vec<PathBuf> = std::fs::read_dir(p)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        let has = |ext: &str| {
            names
                .iter()
                .any(|n| n.extension().is_some_and(|x| x == ext))
        };
        return has("toml") && !has("md");
    }
    p == Path::new("labs")
}

/// `ringlab check labs`: every scenario file parsed and validated as the lab loads it, each
/// problem as `file:line:col: error: message`.
fn check_labs(paths: &[&PathBuf]) -> anyhow::Result<ExitCode> {
    let mut problems: Vec<(String, String)> = Vec::new();
    let mut count = 0;
    for p in paths {
        if !p.exists() && p.as_path() == Path::new("labs") {
            let (ok, bad) = crate::lab::hang::scenario::all();
            count += ok.len() + bad.len();
            problems.extend(bad.into_iter().map(|e| (e.file, e.message)));
            continue;
        }
        let files: Vec<PathBuf> = if p.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(p)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "toml"))
                .collect();
            v.sort();
            v
        } else {
            vec![(*p).clone()]
        };
        for f in files {
            count += 1;
            let name = f.display().to_string();
            let text = match crate::files::read_bounded(
                &f,
                crate::files::MAX_LESSON_BYTES,
                "scenario file",
            )
            .and_then(|b| String::from_utf8(b).map_err(|_| format!("{name} is not UTF-8 text")))
            {
                Ok(t) => t,
                Err(e) => {
                    problems.push((name, e));
                    continue;
                }
            };
            if let Err(e) = crate::lab::hang::scenario::parse(&text) {
                problems.push((name, e.to_string()));
            }
        }
    }
    let mut out = io::stdout().lock();
    for (file, message) in &problems {
        // Parse errors start with their place ("12:3: …"); the rest are about the whole file.
        let placed = message
            .split_once(": ")
            .filter(|(at, _)| at.split(':').all(|n| n.parse::<u32>().is_ok()));
        match placed {
            Some((at, msg)) => writeln!(out, "{file}:{at}: error: {msg}")?,
            None => writeln!(out, "{file}:1:1: error: {message}")?,
        }
    }
    if problems.is_empty() {
        eprintln!("ringlab check: {count} scenario file(s): no problems");
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "ringlab check: {count} scenario file(s): {} error(s)",
            problems.len()
        );
        Ok(ExitCode::from(1))
    }
}

fn check(lessons: &Option<PathBuf>, paths: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let (labs, lesson_paths): (Vec<&PathBuf>, Vec<&PathBuf>) =
        paths.iter().partition(|p| is_lab_path(p));
    if !labs.is_empty() {
        let code = check_labs(&labs)?;
        if lesson_paths.is_empty() || code != ExitCode::SUCCESS {
            return Ok(code);
        }
        let rest: Vec<PathBuf> = lesson_paths.into_iter().cloned().collect();
        return check(lessons, &rest);
    }
    let mut drills = Vec::new();
    // Files that could not be read: reported as errors, the others checked (L7).
    let mut unread: Vec<LoadError> = Vec::new();
    let mut each = |dir: &Path| -> anyhow::Result<Vec<SourceFile>> {
        let mut ok = Vec::new();
        for f in crate::course::lesson::read_dir_each(dir)? {
            match f {
                Ok(f) => ok.push(f),
                Err(e) => unread.push(e),
            }
        }
        Ok(ok)
    };
    let (what, files) = if paths.is_empty() {
        match lessons {
            Some(dir) => {
                drills = read_drill_sources(dir)?;
                (dir.display().to_string(), each(dir)?)
            }
            None => {
                drills = crate::course::lesson::embedded_drill_sources();
                ("the built-in course".to_string(), embedded_sources())
            }
        }
    } else {
        let mut files = Vec::new();
        for p in paths {
            if p.is_dir() {
                files.extend(each(p)?);
            } else {
                files.extend(sources_at(p)?);
            }
            if p.is_dir() {
                drills.extend(read_drill_sources(p)?);
            }
        }
        let names: Vec<_> = paths.iter().map(|p| p.display().to_string()).collect();
        (names.join(", "), files)
    };
    if files.is_empty() && drills.is_empty() && unread.is_empty() {
        eprintln!("ringlab check: no lesson files (*.md) in {what}: nothing to check");
        return Ok(ExitCode::from(1));
    }
    let diags = check_all(&files, &drills);
    if paths.is_empty() {
        report_orphans(&files, &drills);
    }
    let mut out = io::stdout().lock();
    for e in &unread {
        eprintln!("ringlab check: {}", printable(&e.to_string()));
    }
    for d in &diags {
        writeln!(out, "{d}")?;
    }
    let errors = diags.iter().filter(|d| d.is_error()).count() + unread.len();
    let what = match drills.len() {
        0 => what,
        n => format!("{what} (and {n} drill file(s))"),
    };
    if errors == 0 {
        eprintln!(
            "ringlab check: {} lesson file(s) in {what}: no problems",
            files.len()
        );
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "ringlab check: {} lesson file(s) in {what}: {errors} error(s)",
            files.len()
        );
        Ok(ExitCode::from(1))
    }
}

fn ring(lessons: &Option<PathBuf>, args: &RingArgs) -> anyhow::Result<ExitCode> {
    if args.op.is_some() {
        eprintln!(
            "ringlab: note: `ring --op` is deprecated: the collective is `--coll` (as in `bench`, where --op is the reduction)"
        );
    }
    let params = args.params();
    if params.root >= params.ranks {
        anyhow::bail!(
            "--root {} is not a rank: with --ranks {} the root is 0..{}",
            params.root,
            params.ranks,
            params.ranks - 1
        );
    }
    if let Some(algo) = args.algo
        && params.coll.is_point_to_point()
    {
        anyhow::bail!(
            "--algo {algo} does not apply to {}: it is a set of point-to-point sends with one schedule (NCCL orders a group's sends in rounds); leave --algo out",
            params.coll
        );
    }
    if let Some(algo) = args.algo
        && !algo.supports(params.coll)
    {
        anyhow::bail!(
            "--algo {algo} is an all-reduce algorithm: use --coll all-reduce, or another --algo for {}",
            params.coll
        );
    }
    let size = params.dtype.size() as u64;
    if params.bytes < size {
        anyhow::bail!(
            "--bytes {} is less than one {} element ({size} B): give at least {size}, or --dtype u8",
            params.bytes,
            params.dtype
        );
    }
    if let Some(note) = params.rounding_note() {
        eprintln!("ringlab: note: --bytes {} {note}", params.bytes);
    }
    if let Some(g) = args.gpus_per_node
        && !(params.ranks as u64).is_multiple_of(g)
    {
        anyhow::bail!(
            "--gpus-per-node {g} does not divide --ranks {}: every node holds the same number of GPUs (try {})",
            params.ranks,
            divisors(params.ranks)
        );
    }
    let spec = params.spec().map_err(anyhow::Error::msg)?;
    let schedule = Schedule::build(&spec)?;
    if args.gpus_per_node.is_none()
        && params.algo == Algorithm::TwoLevel
        && let Some(note) = crate::collective::node_shape_note(params.ranks)
    {
        eprintln!("ringlab: note: {note}");
    }
    if args.json {
        let mut out = io::BufWriter::new(io::stdout().lock());
        serde_json::to_writer(&mut out, &report(&schedule, params.dtype))?;
        writeln!(out)?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut app = new_app(lessons)?;
    app.open_ring(params).map_err(anyhow::Error::msg)?;
    app.launched_here();
    run_tui(app)
}

/// The divisors of `n` in words ("1, 2, 3, 6"): the node sizes `--gpus-per-node` accepts.
fn divisors(n: usize) -> String {
    (1..=n)
        .filter(|d| n.is_multiple_of(*d))
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Tell (on stderr, never failing the check) about review history whose items are gone.
/// Text from a file or another user made safe for a terminal: control characters (an escape
/// sequence could retitle, recolour, move or clear the screen) are shown as `\x1b`-style
/// escapes (tabs and line ends stay). Every text path that prints what a file, a dump, a log or a variable said goes
/// through it (finding L1).
pub fn printable(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() && c != '\t' && c != '\n' {
                format!("\\x{:02x}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}

fn report_orphans(files: &[SourceFile], drills: &[SourceFile]) {
    let path = progress::data_dir().join(progress::FILE_NAME);
    let Ok(p) = progress::read_file(&path) else {
        return;
    };
    let course = Course::with_drills(
        crate::course::lesson::Origin::Embedded,
        files.to_vec(),
        drills.to_vec(),
    );
    let bank = crate::course::bank::Bank::from_course(&course);
    let orphans = p.orphans(|id| bank.get(id).is_some());
    if !orphans.is_empty() {
        eprintln!(
            "ringlab check: note: your progress has review history for {} item(s) no longer in the course (kept): {}",
            orphans.len(),
            printable(&orphans.join(", "))
        );
    }
}

fn sources_at(p: &Path) -> Result<Vec<SourceFile>, LoadError> {
    if p.is_dir() {
        read_dir_sources(p)
    } else {
        Ok(vec![read_source(p)?])
    }
}

fn embedded_sources() -> Vec<SourceFile> {
    crate::course::lesson::embedded_sources()
}
