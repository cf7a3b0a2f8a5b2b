//! `ringlab present [LESSON] [--record FILE.cast] [--notes]`: presenter mode and its notes
//! terminal.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::tui::app::{App, Screen};
use crate::tui::notes::{self, Hub};
use crate::tui::screens::present::{PresentOptions, PresentState};
use crate::tui::theme::Theme;
use crate::tui::{self, RunOptions, TuiError};

#[derive(Debug, clap::Args)]
pub struct PresentArgs {
    /// Lesson id, e.g. `ring-allreduce` (default: the first lesson).
    pub lesson: Option<String>,
    /// Record the presentation as an asciicast v2 file (asciinema's player and `agg` read it).
    #[arg(long, value_name = "FILE.cast", conflicts_with = "notes")]
    pub record: Option<PathBuf>,
    /// Replace an existing --record FILE (without it an existing file is kept and nothing runs).
    #[arg(long, requires = "record")]
    pub force: bool,
    /// Be the notes terminal: follow the running presenter's slides (run it in a second window).
    #[arg(long)]
    pub notes: bool,
    /// Milliseconds per step of a narrated ring view.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(80..=10_000))]
    pub pace: u64,
    /// Seconds a class quiz question gives before the answer.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub countdown: u64,
}

pub fn present(lessons: &Option<PathBuf>, args: &PresentArgs) -> anyhow::Result<ExitCode> {
    crate::tui::markdown::defer_highlighting();
    let course = super::load_course(lessons)?;
    // Nothing in presenter mode is graded or recorded as progress.
    let mut app = App::new(course, Theme::from_env());
    let path = notes::socket_path();
    if args.notes {
        // Started before the presenter, or left open across its restarts: it waits and follows
        // whichever presenter listens at `path`.
        app.stack.push(Screen::Notes(Box::new(
            crate::tui::screens::notes_view::NotesState::waiting_at(&path),
        )));
        app.launched_here();
        return finish(tui::run_with(
            app,
            RunOptions {
                follow: Some(path),
                ..Default::default()
            },
        ));
    }
    if let Some(file) = &args.record {
        // Refused before the screen opens: a link at the name (with or without --force), or
        // a file there without --force. The recorder checks again as it creates the file.
        match crate::files::check_name(file, args.force) {
            Ok(()) => {}
            Err(crate::files::WriteError::Exists(_)) => {
                eprintln!(
                    "ringlab: {} exists: kept; pass --force to replace it, or record to another file",
                    file.display()
                );
                return Ok(ExitCode::from(2));
            }
            Err(e) => {
                eprintln!("ringlab: {e}");
                return Ok(ExitCode::from(2));
            }
        }
    }
    let entry = match &args.lesson {
        Some(id) => match app.course.position_of(id) {
            Some(i) => i,
            None => anyhow::bail!(
                "no lesson `{id}`; known lessons: {}",
                app.course.ids().join(", ")
            ),
        },
        None => app
            .course
            .entries
            .iter()
            .position(|e| e.lesson.is_some())
            .ok_or_else(|| anyhow::anyhow!("the course has no lesson that loads"))?,
    };
    let options = PresentOptions {
        pace_ms: args.pace,
        countdown_s: args.countdown,
    };
    let mut state = PresentState::start(&mut app, entry, options).map_err(anyhow::Error::msg)?;
    match Hub::start(&path) {
        Ok(hub) => state.hub = Some(hub),
        Err(e) => eprintln!("ringlab: note: no presenter notes this time: {e}"),
    }
    state.publish();
    app.stack.push(Screen::Present(Box::new(state)));
    app.launched_here();
    finish(tui::run_with(
        app,
        RunOptions {
            record: args.record.clone(),
            replace_record: args.force,
            ..Default::default()
        },
    ))
}

fn finish(r: Result<tui::Exit, TuiError>) -> anyhow::Result<ExitCode> {
    match r {
        Ok(exit) => Ok(ExitCode::from(exit.status())),
        Err(e @ TuiError::NotATerminal) => {
            eprintln!("ringlab: {e}");
            Ok(ExitCode::from(2))
        }
        Err(e) => Err(e.into()),
    }
}
