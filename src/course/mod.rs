//! The course as plain data: lessons with front matter, custom fenced blocks, math, and checks.
//! Nothing here knows about terminals, sockets or GPUs.

pub mod block;
pub mod check;
pub mod lesson;
pub mod math;

pub use block::{Block, BlockKind};
pub use check::{Diagnostic, Severity};
pub use lesson::{Course, Lesson, LessonMeta};
