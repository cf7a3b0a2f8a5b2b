//! The course as plain data: lessons with front matter, custom fenced blocks, math, and checks.
//! Nothing here knows about terminals, sockets or GPUs.

pub mod bank;
pub mod block;
pub mod check;
pub mod compute;
pub mod grade;
pub mod lesson;
pub mod math;
pub mod narrate;
pub mod quiz;
pub mod quizcheck;
pub mod table;

pub use block::{Block, BlockKind};
pub use check::{Diagnostic, Severity};
pub use lesson::{Course, Lesson, LessonMeta};
