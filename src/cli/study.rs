//! `ringlab quiz`, `ringlab drill`, `ringlab stats`, `ringlab progress export|import`, and the
//! hidden `ringlab __progress-stress DIR` that the durability test kills at random moments.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use chrono::Utc;
use serde_json::{Value, json};

use super::{load_course, new_app, run_tui};
use crate::course::bank::{Bank, Entry};
use crate::course::grade::{SelfGrade, describe_answer, letter};
use crate::course::quiz::{Answer, ParamSpec};
use crate::study::progress;
use crate::tui::app::Screen;
use crate::tui::screens::{drill, quiz, stats};

#[derive(Debug, clap::Args)]
pub struct QuizArgs {
    /// Lesson id (`ring-allreduce`) or drill file (`interview`); default: the lessons you
    /// have started.
    pub lesson: Option<String>,
    /// Print the items instead of opening the quiz (no terminal needed).
    #[arg(long)]
    pub list: bool,
    /// With --list: print JSON.
    #[arg(long, requires = "list")]
    pub json: bool,
    /// With --list: include answers and explanations.
    #[arg(long, requires = "list")]
    pub answers: bool,
}

#[derive(Debug, clap::Args)]
pub struct DrillArgs {
    /// Mock interview: interview questions, each followed by its follow-ups.
    #[arg(long)]
    pub mock: bool,
    /// End the session after N minutes.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=600))]
    pub minutes: Option<u32>,
    /// Give each answer SECS seconds ("answer aloud in 60 s").
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub timer: Option<u32>,
}

#[derive(Debug, clap::Args)]
pub struct StatsArgs {
    /// Print the stats as JSON instead of opening the screen.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum ProgressCommand {
    /// Write your progress (reading, review history, FSRS state) to FILE.
    Export {
        file: PathBuf,
        /// Replace FILE if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Merge FILE into your progress: per item the newer review wins; nothing is lost.
    Import { file: PathBuf },
    /// Print where progress is kept.
    Path,
}

pub fn quiz_cmd(lessons: &Option<PathBuf>, args: &QuizArgs) -> anyhow::Result<ExitCode> {
    if args.list {
        let course = load_course(lessons)?;
        let bank = Bank::from_course(&course);
        let entries: Vec<&Entry> = match &args.lesson {
            Some(id) => {
                let Some(d) = bank.deck_index(id) else {
                    let known: Vec<&str> = bank.decks.iter().map(|d| d.id.as_str()).collect();
                    anyhow::bail!(
                        "no lesson or drill deck `{id}`; known: {}",
                        known.join(", ")
                    );
                };
                bank.entries.iter().filter(|e| e.deck == d).collect()
            }
            None => bank.entries.iter().collect(),
        };
        let mut out = io::BufWriter::new(io::stdout().lock());
        if args.json {
            let items: Vec<Value> = entries
                .iter()
                .map(|e| item_json(&bank, e, args.answers))
                .collect();
            serde_json::to_writer_pretty(&mut out, &items)?;
            writeln!(out)?;
        } else {
            for e in entries {
                write_item_text(&mut out, e, args.answers)?;
            }
        }
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut app = new_app(lessons)?;
    let q = quiz::open(&app, args.lesson.as_deref()).map_err(anyhow::Error::msg)?;
    app.stack.push(Screen::Quiz(Box::new(q)));
    app.launched_here();
    run_tui(app)
}

fn params_json(p: &ParamSpec) -> Value {
    match p {
        ParamSpec::List(v) => json!(v),
        ParamSpec::Range { min, max, step } => json!({"min": min, "max": max, "step": step}),
    }
}

fn item_json(bank: &Bank, e: &Entry, answers: bool) -> Value {
    let it = &e.item;
    let deck = bank.deck_of(e).map_or("", |d| d.id.as_str());
    let mut v = json!({
        "id": it.id,
        "type": it.kind,
        "deck": deck,
        "file": e.path,
        "line": e.line,
        "section": e.section.as_ref().map(|s| s.title.clone()),
        "prompt": it.prompt,
        "choices": it.choices,
        "unit": it.unit.map(|u| u.symbol()),
        "tolerance": (it.kind == crate::course::quiz::Kind::Numeric).then_some(it.tolerance),
        "params": it.params.iter().map(|(k, p)| (k.clone(), params_json(p))).collect::<serde_json::Map<_, _>>(),
        "tags": it.tags,
        "follow_ups": it.follow_ups,
        "follow_up_of": e.inline_of,
        "source": it.source,
    });
    if answers && let Some(obj) = v.as_object_mut() {
        let answer = match &it.answer {
            Answer::Choice(i) => json!(i),
            Answer::Choices(v) | Answer::Order(v) => json!(v),
            Answer::Number(x) => json!(x),
            Answer::Computed(name) => json!({ "from": name }),
            Answer::Model(m) => json!(m),
        };
        obj.insert("answer".into(), answer);
        obj.insert("explanation".into(), json!(it.explanation));
    }
    v
}

fn write_item_text(out: &mut impl Write, e: &Entry, answers: bool) -> io::Result<()> {
    let it = &e.item;
    let p = crate::cli::printable;
    writeln!(
        out,
        "{} ({}) {}:{}",
        p(&it.id),
        it.kind.name(),
        p(&e.path),
        e.line
    )?;
    writeln!(out, "  {}", p(&it.prompt))?;
    for (i, c) in it.choices.iter().enumerate() {
        writeln!(out, "    {}) {}", letter(i), p(c))?;
    }
    if answers {
        match it.instantiate(0) {
            Ok(inst) if !it.is_parametric() => {
                writeln!(out, "  answer: {}", p(&describe_answer(it, &inst)))?;
            }
            Ok(inst) => {
                let drawn: Vec<String> = inst
                    .values
                    .iter()
                    .map(|(k, v)| format!("{k} = {}", crate::course::quiz::format_number(*v)))
                    .collect();
                let how = match &it.answer {
                    Answer::Computed(name) => format!("computed by {name}"),
                    _ => "fixed".to_string(),
                };
                writeln!(
                    out,
                    "  answer: {how}; e.g. with {}: {}",
                    p(&drawn.join(", ")),
                    p(&describe_answer(it, &inst))
                )?;
            }
            Err(e) => writeln!(out, "  answer: cannot be computed: {e}")?,
        }
    }
    writeln!(out)
}

pub fn drill_cmd(lessons: &Option<PathBuf>, args: &DrillArgs) -> anyhow::Result<ExitCode> {
    let mut app = new_app(lessons)?;
    let opts = drill::DrillOptions {
        mock: args.mock,
        minutes: args.minutes,
        timer: args.timer,
    };
    let d = drill::open(&app, &opts);
    app.stack.push(Screen::Quiz(Box::new(d)));
    app.launched_here();
    run_tui(app)
}

pub fn stats_cmd(lessons: &Option<PathBuf>, args: &StatsArgs) -> anyhow::Result<ExitCode> {
    let mut app = new_app(lessons)?;
    if args.json {
        let bank = Bank::from_course(&app.course);
        let s = stats::Stats::compute(&bank, &app.progress, Utc::now(), stats::local_offset());
        let mut warnings = progress::storage_warnings(&progress::data_dir());
        if app.progress_dir.is_none()
            && let Some(st) = &app.status
        {
            warnings.insert(0, st.clone());
        }
        for w in &warnings {
            eprintln!("ringlab: warning: {w}");
        }
        let mut v = serde_json::to_value(&s)?;
        if let Some(o) = v.as_object_mut() {
            o.insert("warnings".into(), serde_json::json!(warnings));
        }
        let mut out = io::stdout().lock();
        serde_json::to_writer_pretty(&mut out, &v)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let s = stats::StatsState::new(&app);
    if !s.stats.orphans.is_empty() {
        eprintln!(
            "ringlab: {} item(s) with review history are no longer in the course (kept): {}",
            s.stats.orphans.len(),
            crate::cli::printable(&s.stats.orphans.join(", "))
        );
    }
    app.stack.push(Screen::Stats(Box::new(s)));
    app.launched_here();
    run_tui(app)
}

pub fn progress_cmd(cmd: &ProgressCommand) -> anyhow::Result<ExitCode> {
    let dir = progress::data_dir();
    match cmd {
        ProgressCommand::Path => {
            println!("{}", dir.join(progress::FILE_NAME).display());
        }
        ProgressCommand::Export { file, force } => {
            // Refused before progress is even loaded: a link at the name (with or without
            // --force: never written through), or a file there without --force.
            match crate::files::check_name(file, *force) {
                Ok(()) => {}
                Err(crate::files::WriteError::Exists(_)) => {
                    eprintln!(
                        "ringlab: {} exists; kept it (add --force to replace it)",
                        file.display()
                    );
                    return Ok(ExitCode::from(2));
                }
                Err(e) => {
                    eprintln!("ringlab: {e}");
                    return Ok(ExitCode::from(2));
                }
            }
            let (p, notice) = progress::load(&dir)?;
            if let Some(n) = notice {
                eprintln!("ringlab: {n}");
            }
            progress::write_file(file, &p, *force)?;
            eprintln!(
                "ringlab: exported {} lesson(s) and {} item(s) ({} reviews) to {}",
                p.lessons.len(),
                p.items.len(),
                p.review_count(),
                file.display()
            );
        }
        ProgressCommand::Import { file } => {
            let theirs = progress::read_file(file)?;
            let (mut mine, notice) = progress::load(&dir)?;
            if let Some(n) = notice {
                eprintln!("ringlab: {n}");
            }
            let r = mine.merge(&theirs);
            if let Some(n) = progress::save(&dir, &mut mine)? {
                eprintln!("ringlab: {n}");
            }
            eprintln!(
                "ringlab: imported {}: {} new item(s), {} updated (newer there), {} kept (newer here), {} unchanged (identical), {} lesson(s) advanced",
                file.display(),
                r.added,
                r.updated,
                r.kept,
                r.unchanged,
                r.lessons
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Save progress in a loop, one more review each time, until killed (or `iterations` saves).
/// The durability test SIGKILLs it at random moments and checks the file is always whole.
pub fn progress_stress(dir: &Path, iterations: Option<u64>) -> anyhow::Result<ExitCode> {
    let (mut p, notice) = progress::load(dir)?;
    if let Some(n) = notice {
        anyhow::bail!("{n}");
    }
    let mut k: u64 = 0;
    loop {
        if iterations.is_some_and(|n| k >= n) {
            return Ok(ExitCode::SUCCESS);
        }
        let id = format!("stress-{}", p.review_count() % 16);
        p.record_review(&id, SelfGrade::Good, Some(true), "stress", None, Utc::now());
        progress::save(dir, &mut p)?;
        k += 1;
    }
}
