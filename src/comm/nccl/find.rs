//! Finding NCCL for the rank processes. cudarc dlopens `libnccl.so` (and a few versioned names,
//! but not `libnccl.so.2`), and glibc reads `LD_LIBRARY_PATH` only when a process starts. So the
//! launcher looks for the library itself and, where only `libnccl.so.2` exists, makes a private
//! directory holding a `libnccl.so` link; that directory goes first on every rank's
//! `LD_LIBRARY_PATH`.
//!
//! Where it looks, in order: `RINGLAB_NCCL_LIB` (a file, and then nowhere else),
//! `LD_LIBRARY_PATH`, the system library directories, then the `nvidia/nccl/lib` folder of the
//! nvidia-nccl-cu12/cu13 Python wheels in the invoking user's own Python environments: an
//! active virtualenv or conda, every `X/bin` on PATH (a venv on PATH but not activated), the
//! system prefixes and `$HOME/.local`. Never another user's home: loading a library runs its
//! code, so a library (or a folder above it) that another user than the invoking one and root
//! could have written is refused, saying why: by its mode, by a group with another member in
//! it (root's included) or by an ACL entry ([`trust`], modelled on OpenSSH's StrictModes).
//!
//! Nothing here loads CUDA or NCCL: this runs in the launcher, which never does.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub mod trust;
use trust::At;
pub use trust::{UserDb, group_is_private, group_others};

/// The variable that names the NCCL library to use, skipping the search.
pub const OVERRIDE: &str = "RINGLAB_NCCL_LIB";

/// Where NCCL was found and what a child needs to load it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The library file itself (`…/libnccl.so.2` or `…/libnccl.so`).
    pub lib: PathBuf,
    /// The directory to put first on LD_LIBRARY_PATH: it holds a `libnccl.so`.
    pub dir: PathBuf,
    /// `dir` is our private directory with a `libnccl.so` link to `lib`.
    pub linked: bool,
    /// Where it was found, in words ("LD_LIBRARY_PATH", "system", "pip wheel …").
    pub how: String,
    /// The private link directory, removed when the last copy of this is dropped.
    pub private: Option<Arc<PrivateDir>>,
    /// The library, opened once and checked through its descriptor; the link in `dir` is
    /// `/proc/self/fd/N` for this descriptor, which every child inherits, so a rank loads the
    /// very file that was checked even if the name is swapped meanwhile.
    pub held: Option<Held>,
}

/// An open, checked library file whose descriptor children inherit (not close-on-exec).
#[derive(Debug, Clone)]
pub struct Held(pub Arc<std::fs::File>);

impl Held {
    /// The descriptor number children find it at.
    pub fn fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.0.as_raw_fd()
    }

    /// What the link names: `/proc/self/fd/N`.
    pub fn link_target(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.fd()))
    }

    fn inode(&self) -> Option<(u64, u64)> {
        self.0.metadata().ok().map(|m| (m.dev(), m.ino()))
    }
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        self.inode() == other.inode()
    }
}

impl Eq for Held {}

/// Why a library file was not held for the ranks.
#[derive(Debug, thiserror::Error)]
enum Unheld {
    #[error("opening {}: {source}", path.display())]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("reading {}: {source}", path.display())]
    Stat {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not a regular file", .0.display())]
    NotAFile(PathBuf),
    /// [`trust::entry_problem`]'s words.
    #[error("{0}")]
    Untrusted(String),
    #[error("keeping {} open for the ranks: {source}", path.display())]
    Inherit {
        path: PathBuf,
        source: nix::errno::Errno,
    },
}

/// Open `real` (a path with no link left in it) once, without following a link in its last
/// part, and check what was opened: a regular file that passes [`trust::entry_problem`] (its
/// ACL read through the descriptor). The descriptor is then made inheritable. Errors say why.
fn open_checked(real: &Path, uid: u32, strict: bool) -> Result<Held, Unheld> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    use std::os::fd::AsFd;
    use std::os::unix::fs::OpenOptionsExt;
    let path = || real.to_path_buf();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(real)
        .map_err(|source| Unheld::Open {
            path: path(),
            source,
        })?;
    let m = f.metadata().map_err(|source| Unheld::Stat {
        path: path(),
        source,
    })?;
    if !m.is_file() {
        return Err(Unheld::NotAFile(path()));
    }
    if strict && let Some(why) = trust::entry_problem(real, &m, At::Fd(f.as_fd()), uid) {
        return Err(Unheld::Untrusted(why));
    }
    // Clear FD_CLOEXEC only: the ranks inherit the descriptor.
    fcntl(&f, FcntlArg::F_SETFD(FdFlag::empty())).map_err(|source| Unheld::Inherit {
        path: path(),
        source,
    })?;
    Ok(Held(Arc::new(f)))
}

/// A directory made for this process alone (mkdtemp: mode 0700, an unpredictable name,
/// created only if it did not exist), removed with its contents on drop.
#[derive(Debug, PartialEq, Eq)]
pub struct PrivateDir(pub PathBuf);

impl PrivateDir {
    /// A new private `ringlab-nccl-…` in the temporary directory ([`crate::private::fresh_dir`]).
    pub fn new() -> std::io::Result<Self> {
        crate::private::fresh_dir(&std::env::temp_dir(), "ringlab-nccl-").map(Self)
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FindError {
    #[error(
        "NCCL not found: no libnccl.so or libnccl.so.2 in {} place(s) searched ({}). Install it with `pip install nvidia-nccl-cu12` (or cu13), or the libnccl2 package, or add its folder to LD_LIBRARY_PATH, or name the file in {OVERRIDE}",
        searched.len(),
        preview(searched)
    )]
    NotFound { searched: Vec<PathBuf> },
    #[error("{OVERRIDE}={0}: {1}")]
    Override(PathBuf, String),
    #[error(
        "refusing to load {} (found in {how}): {why}. Loading a library runs its code as you; move NCCL somewhere only you or root can write, or fix the permissions",
        lib.display()
    )]
    Untrusted {
        lib: PathBuf,
        how: String,
        why: String,
    },
    #[error("found {lib} but could not make the libnccl.so link in {dir}: {err}")]
    Link {
        lib: PathBuf,
        dir: PathBuf,
        err: String,
    },
}

fn preview(p: &[PathBuf]) -> String {
    let mut s: Vec<String> = p.iter().take(4).map(|x| x.display().to_string()).collect();
    if p.len() > 4 {
        s.push("…".into());
    }
    s.join(", ")
}

/// A directory to look in, and how to describe a hit there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub dir: PathBuf,
    pub how: String,
}

/// What the search reads from the environment (so tests can give their own).
#[derive(Debug, Clone, Default)]
pub struct Env {
    pub ld_library_path: Option<String>,
    pub path: Option<String>,
    pub virtual_env: Option<String>,
    pub conda_prefix: Option<String>,
    pub home: Option<String>,
}

impl Env {
    pub fn current() -> Self {
        let v = |n: &str| std::env::var(n).ok().filter(|s| !s.is_empty());
        Self {
            ld_library_path: v("LD_LIBRARY_PATH"),
            path: v("PATH"),
            virtual_env: v("VIRTUAL_ENV"),
            conda_prefix: v("CONDA_PREFIX"),
            home: v("HOME"),
        }
    }
}

/// The system library directories searched.
const SYSTEM_DIRS: [&str; 9] = [
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
    "/usr/local/cuda/lib64",
    "/usr/local/cuda/targets/x86_64-linux/lib",
    "/usr/local/nccl/lib",
    "/opt/nccl/lib",
];

/// The places searched, in order, for the environment `env`.
pub fn places(env: &Env) -> Vec<Place> {
    let mut v = Vec::new();
    if let Some(ld) = &env.ld_library_path {
        v.extend(ld_places(ld));
    }
    for d in SYSTEM_DIRS {
        v.push(Place {
            dir: d.into(),
            how: "system library directory".into(),
        });
    }
    for sp in site_packages(env) {
        v.push(wheel_place(&sp));
    }
    v
}

/// The places searched on this machine, in order.
pub fn default_places() -> Vec<Place> {
    places(&Env::current())
}

fn ld_places(ld: &str) -> Vec<Place> {
    ld.split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Place {
            dir: d.into(),
            how: "LD_LIBRARY_PATH".into(),
        })
        .collect()
}

fn wheel_place(site: &Path) -> Place {
    Place {
        dir: site.join("nvidia/nccl/lib"),
        how: format!("pip wheel nvidia-nccl in {}", site.display()),
    }
}

/// The invoking user's Python prefixes: an active virtualenv or conda, the prefix of every
/// `X/bin` on PATH (a venv on PATH but not activated), the system prefixes, `$HOME/.local`.
pub fn python_prefixes(env: &Env) -> Vec<PathBuf> {
    let mut prefixes: Vec<PathBuf> = Vec::new();
    for p in [&env.virtual_env, &env.conda_prefix].into_iter().flatten() {
        prefixes.push(PathBuf::from(p));
    }
    for dir in env.path.as_deref().unwrap_or("").split(':').map(Path::new) {
        if dir.is_absolute()
            && dir.file_name().is_some_and(|n| n == "bin")
            && let Some(prefix) = dir.parent()
        {
            prefixes.push(prefix.to_path_buf());
        }
    }
    prefixes.extend(["/usr".into(), "/usr/local".into(), "/opt/conda".into()]);
    if let Some(h) = &env.home {
        prefixes.push(Path::new(h).join(".local"));
    }
    let mut seen = Vec::new();
    prefixes.retain(|p| {
        let fresh = !seen.contains(p);
        seen.push(p.clone());
        fresh
    });
    prefixes
}

/// Every site-packages / dist-packages folder under the prefixes of [`python_prefixes`],
/// found by listing directories, not by running Python.
pub fn site_packages(env: &Env) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for prefix in python_prefixes(env) {
        let lib = prefix.join("lib");
        let Ok(rd) = std::fs::read_dir(&lib) else {
            continue;
        };
        let mut pys: Vec<PathBuf> = rd
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
            .map(|e| e.path())
            .collect();
        pys.sort();
        for py in pys {
            for sub in ["site-packages", "dist-packages"] {
                let d = py.join(sub);
                if d.is_dir() && !out.contains(&d) {
                    out.push(d);
                }
            }
        }
    }
    out
}

/// Where to make the `libnccl.so` link when only `libnccl.so.2` exists.
#[derive(Debug, Clone)]
pub enum LinkAt {
    /// This directory (made 0700 if missing; refused unless it is ours).
    Dir(PathBuf),
    /// A fresh private directory ([`PrivateDir`]), removed when the result is dropped.
    Private,
}

/// Can someone other than `uid` and root change what `path` holds? `None` if not; else why.
/// The file it resolves to and every directory above that are checked
/// ([`trust::entry_problem`]).
pub fn writable_by_others(path: &Path, uid: u32) -> Option<String> {
    let real = match std::fs::canonicalize(path) {
        Ok(p) => p,
        Err(e) => return Some(format!("{} cannot be resolved: {e}", path.display())),
    };
    for p in real.ancestors() {
        match std::fs::metadata(p) {
            Ok(m) => {
                if let Some(why) = trust::entry_problem(p, &m, At::Path(p), uid) {
                    return Some(why);
                }
            }
            Err(e) => return Some(format!("{}: {e}", p.display())),
        }
    }
    None
}

/// Can someone other than `uid` and root change what gets loaded through `path`? Both the path
/// as written (every link and folder on it, since `LD_LIBRARY_PATH` names them and a link can
/// be swapped by whoever can write the folder holding it) and the file it resolves to, with
/// the folders above that. `None` if not; else why.
pub fn untrusted(path: &Path, uid: u32) -> Option<String> {
    let written = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().map_or_else(|_| path.to_path_buf(), |d| d.join(path))
    };
    for p in written.ancestors().filter(|p| !p.as_os_str().is_empty()) {
        match std::fs::symlink_metadata(p) {
            Ok(m) => {
                if let Some(why) = trust::entry_problem(p, &m, At::Path(p), uid) {
                    return Some(why);
                }
            }
            Err(e) => return Some(format!("{}: {e}", p.display())),
        }
    }
    writable_by_others(path, uid)
}

fn me() -> u32 {
    nix::unistd::getuid().as_raw()
}

/// The library in `dir`: `libnccl.so`, else `libnccl.so.2`, else the highest
/// `libnccl.so.2.x.y`; with whether it is the plain name.
fn lib_in(dir: &Path) -> Option<(PathBuf, bool)> {
    let plain = dir.join("libnccl.so");
    if plain.exists() {
        return Some((plain, true));
    }
    versioned_lib(dir).map(|v| (v, false))
}

/// Every NCCL library in `places` (one per place, as the search would take it), deduplicated
/// by the file it resolves to: more than one means ranks and other programs (PyTorch loads
/// its own wheel's) may run different NCCLs.
pub fn all_in(places: &[Place]) -> Vec<(PathBuf, String)> {
    let mut out: Vec<(PathBuf, String)> = Vec::new();
    for p in places {
        if let Some((lib, _)) = lib_in(&p.dir) {
            let real = std::fs::canonicalize(&lib).unwrap_or(lib);
            if !out.iter().any(|(l, _)| *l == real) {
                out.push((real, p.how.clone()));
            }
        }
    }
    out
}

/// Find NCCL in `places`; where only `libnccl.so.2` exists, link it as `libnccl.so` where
/// `link` says. The first library found is the one used; one that others could have written
/// is refused, not skipped.
pub fn find_in(places: &[Place], link: &LinkAt) -> Result<Found, FindError> {
    for p in places {
        if let Some((lib, _)) = lib_in(&p.dir) {
            return use_lib(&lib, false, &p.how, link);
        }
    }
    Err(FindError::NotFound {
        searched: places.iter().map(|p| p.dir.clone()).collect(),
    })
}

/// Use `lib`. A library the search found must pass the trust rule; one the user named
/// (`explicit`, RINGLAB_NCCL_LIB) is their choice: where the rule would refuse it (a venv owned
/// by another account on a shared GPU box, even for root) it is loaded with a warning that
/// says why, naming the owner.
fn use_lib(lib: &Path, explicit: bool, how: &str, link_at: &LinkAt) -> Result<Found, FindError> {
    let uid = me();
    let refuse = |why: String| FindError::Untrusted {
        lib: lib.to_path_buf(),
        how: how.to_string(),
        why,
    };
    let mut strict = true;
    if let Some(why) = untrusted(lib, uid) {
        if !explicit {
            return Err(refuse(why));
        }
        eprintln!(
            "ringlab: warning: {OVERRIDE}={}: {why}; loading it anyway because you named it \
             (the search would refuse it: loading a library runs its code)",
            lib.display()
        );
        strict = false;
    }
    let real = std::fs::canonicalize(lib).unwrap_or(lib.to_path_buf());
    // The file checked is the file loaded: open it once, check the open file, and let the
    // ranks load that descriptor. (The path was checked above; between that check and this
    // open the name could point elsewhere, which the checks on the open file catch.)
    let held = open_checked(&real, uid, strict).map_err(|e| refuse(e.to_string()))?;
    let (dir, private) = match link_at {
        LinkAt::Dir(d) => (d.clone(), None),
        LinkAt::Private => {
            let p = PrivateDir::new().map_err(|err| FindError::Link {
                lib: real.clone(),
                dir: std::env::temp_dir(),
                err: err.to_string(),
            })?;
            (p.0.clone(), Some(Arc::new(p)))
        }
    };
    link(&held.link_target(), &dir).map_err(|err| FindError::Link {
        lib: real.clone(),
        dir: dir.clone(),
        err: err.to_string(),
    })?;
    Ok(Found {
        lib: real,
        dir,
        linked: true,
        how: how.to_string(),
        private,
        held: Some(held),
    })
}

/// Find NCCL on this machine: the file `RINGLAB_NCCL_LIB` names, else the search.
pub fn find() -> Result<Found, FindError> {
    match std::env::var_os(OVERRIDE).filter(|v| !v.is_empty()) {
        Some(v) => find_override(Path::new(&v), &LinkAt::Private),
        None => find_in(&default_places(), &LinkAt::Private),
    }
}

/// The library an explicit `RINGLAB_NCCL_LIB` names: a file called libnccl.so or
/// libnccl.so.2[.x.y].
pub fn find_override(lib: &Path, link: &LinkAt) -> Result<Found, FindError> {
    let bad = |why: &str| FindError::Override(lib.to_path_buf(), why.to_string());
    let name = lib
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    if !name.starts_with("libnccl.so") {
        return Err(bad(
            "not an NCCL library file (expected …/libnccl.so or …/libnccl.so.2)",
        ));
    }
    match std::fs::metadata(lib) {
        Err(e) => Err(bad(&e.to_string())),
        Ok(m) if !m.is_file() => Err(bad("not a regular file")),
        Ok(_) => use_lib(lib, true, OVERRIDE, link),
    }
}

/// `libnccl.so.2`, else the highest `libnccl.so.2.x.y`, in `dir`.
fn versioned_lib(dir: &Path) -> Option<PathBuf> {
    let two = dir.join("libnccl.so.2");
    if two.exists() {
        return Some(two);
    }
    let version = |p: &PathBuf| -> Vec<u64> {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
            .trim_start_matches("libnccl.so.")
            .split('.')
            .map(|x| x.parse().unwrap_or(0))
            .collect()
    };
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("libnccl.so.2."))
        .map(|e| e.path())
        .collect();
    // By version number, not as text (2.21 is newer than 2.9).
    v.sort_by_key(version);
    v.pop()
}

/// Make `dir/libnccl.so` point at `lib` (a held descriptor's `/proc/self/fd/N`). The
/// directory must be ours, not a symlink, and private (0700).
fn link(lib: &Path, dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::symlink_metadata(dir) {
        // One rule for a private folder: ours, a real folder, closed to others (0700).
        Ok(_) => crate::private::check_private_dir(dir)?,
        Err(_) => std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(dir)?,
    }
    let target = dir.join("libnccl.so");
    if std::fs::read_link(&target).is_ok_and(|t| t == lib) {
        return Ok(());
    }
    let tmp = dir.join(format!(".libnccl.so.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(lib, &tmp)?;
    std::fs::rename(&tmp, &target)
}

/// The LD_LIBRARY_PATH a child needs: the found directory first, then what was already set.
pub fn ld_library_path(found: &Found, current: Option<&str>) -> String {
    let mut parts = vec![found.dir.display().to_string()];
    if found.linked
        && let Some(real) = found.lib.parent()
    {
        // The wheel's own folder too, for any library next to NCCL.
        parts.push(real.display().to_string());
    }
    for p in current.unwrap_or("").split(':').filter(|p| !p.is_empty()) {
        if !parts.iter().any(|x| x == p) {
            parts.push(p.to_string());
        }
    }
    parts.join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "ringlab-ncclfind-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("mkdir");
        d
    }

    #[test]
    fn only_the_versioned_library_gets_a_private_link() {
        let root = tree();
        let site = root.join("lib/python3.12/site-packages");
        let lib_dir = site.join("nvidia/nccl/lib");
        std::fs::create_dir_all(&lib_dir).expect("mkdir");
        std::fs::write(lib_dir.join("libnccl.so.2"), b"\x7fELF fake").expect("write");
        let empty = root.join("usr/lib");
        std::fs::create_dir_all(&empty).expect("mkdir");
        let places = vec![
            Place {
                dir: empty,
                how: "system library directory".into(),
            },
            wheel_place(&site),
        ];
        let link_dir = root.join("links");
        let f = find_in(&places, &LinkAt::Dir(link_dir.clone())).expect("found");
        assert!(f.linked);
        assert_eq!(f.dir, link_dir);
        assert!(f.how.contains("pip wheel"), "{f:?}");
        let link = link_dir.join("libnccl.so");
        // The link names the held descriptor, which is the library's file.
        let held = f.held.as_ref().expect("held");
        assert_eq!(
            std::fs::read_link(&link).expect("a link"),
            held.link_target()
        );
        let m = std::fs::metadata(lib_dir.join("libnccl.so.2")).expect("lib");
        let through = std::fs::metadata(&link).expect("through the link");
        assert_eq!((through.dev(), through.ino()), (m.dev(), m.ino()));
        assert_eq!(
            std::fs::read(&link).expect("through the link"),
            b"\x7fELF fake"
        );
        // Children get the link directory first, then what was set.
        let ld = ld_library_path(&f, Some("/opt/x:/opt/y"));
        assert!(ld.starts_with(&link_dir.display().to_string()), "{ld}");
        assert!(ld.ends_with("/opt/x:/opt/y"), "{ld}");
        // Idempotent: a second search keeps the same link.
        assert_eq!(
            find_in(&places, &LinkAt::Dir(link_dir.clone())).expect("again"),
            f
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_plain_libnccl_so_is_loaded_through_its_descriptor_too() {
        let root = tree();
        std::fs::write(root.join("libnccl.so"), b"x").expect("write");
        let f = find_in(
            &ld_places(&format!("::{}", root.display())),
            &LinkAt::Dir(root.join("links")),
        )
        .expect("found");
        assert!(f.linked);
        assert_eq!(f.dir, root.join("links"));
        assert_eq!(f.how, "LD_LIBRARY_PATH");
        assert_eq!(
            std::fs::read(root.join("links/libnccl.so")).expect("through the link"),
            b"x"
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    /// The file checked is the file loaded: while another thread swaps the library's name
    /// between a trusted file and a world-writable one a thousand times, every search either
    /// refuses (it opened the writable one) or hands the ranks the trusted one.
    #[test]
    fn a_library_swapped_between_check_and_load_is_never_the_one_loaded() {
        use std::os::unix::fs::PermissionsExt;
        use std::sync::atomic::{AtomicBool, Ordering};
        let root = tree();
        let lib = root.join("libnccl.so.2");
        let good = root.join("good");
        let evil = root.join("evil");
        let stop = Arc::new(AtomicBool::new(false));
        std::fs::write(&lib, b"trusted").expect("write");
        let flipper = {
            let (lib, good, evil, stop) = (lib.clone(), good.clone(), evil.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut flips = 0;
                while !stop.load(Ordering::Relaxed) || flips < 1000 {
                    // Two files take turns under the library's name: the trusted one and one
                    // anybody could have written.
                    let bad = flips % 2 == 0;
                    let (src, body, mode) = if bad {
                        (&evil, &b"evil!!!"[..], 0o666)
                    } else {
                        (&good, &b"trusted"[..], 0o644)
                    };
                    std::fs::write(src, body).expect("write");
                    std::fs::set_permissions(src, std::fs::Permissions::from_mode(mode))
                        .expect("chmod");
                    std::fs::rename(src, &lib).expect("swap");
                    flips += 1;
                }
                flips
            })
        };
        let places = ld_places(&root.display().to_string());
        let (mut refused, mut loaded) = (0, 0);
        for _ in 0..1000 {
            match find_in(&places, &LinkAt::Private) {
                Ok(f) => {
                    loaded += 1;
                    let got = std::fs::read(f.dir.join("libnccl.so")).expect("through the link");
                    assert_eq!(got, b"trusted", "the ranks would load what was not checked");
                }
                Err(FindError::Untrusted { .. }) => refused += 1,
                Err(e) => panic!("{e}"),
            }
        }
        stop.store(true, Ordering::Relaxed);
        let flips = flipper.join().expect("flipper");
        assert!(flips >= 1000, "{flips}");
        assert_eq!(refused + loaded, 1000);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn the_newest_versioned_library_wins_by_number_not_text() {
        let root = tree();
        std::fs::write(root.join("libnccl.so.2.9.9"), b"old").expect("write");
        std::fs::write(root.join("libnccl.so.2.21.5"), b"new").expect("write");
        let f = find_in(
            &ld_places(&root.display().to_string()),
            &LinkAt::Dir(root.join("l")),
        )
        .expect("found");
        assert!(f.lib.ends_with("libnccl.so.2.21.5"), "{f:?}");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_link_in_a_folder_others_can_write_is_refused_though_its_target_is_safe() {
        use std::os::unix::fs::PermissionsExt;
        let root = tree();
        let safe = root.join("safe");
        let open = root.join("open");
        std::fs::create_dir_all(&safe).expect("mkdir");
        std::fs::create_dir_all(&open).expect("mkdir");
        std::fs::write(safe.join("libnccl.so.2"), b"x").expect("write");
        std::os::unix::fs::symlink(safe.join("libnccl.so.2"), open.join("libnccl.so"))
            .expect("link");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let e = find_in(
            &ld_places(&open.display().to_string()),
            &LinkAt::Dir(root.join("l")),
        )
        .expect_err("anyone could swap the link");
        assert!(e.to_string().contains("writable by every user"), "{e}");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_full_version_name_is_found_too() {
        let root = tree();
        std::fs::write(root.join("libnccl.so.2.21.5"), b"x").expect("write");
        let f = find_in(
            &ld_places(&root.display().to_string()),
            &LinkAt::Dir(root.join("l")),
        )
        .expect("found");
        assert!(f.lib.ends_with("libnccl.so.2.21.5"));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn nothing_found_says_where_it_looked_and_how_to_install() {
        let root = tree();
        let e = find_in(
            &ld_places(&root.display().to_string()),
            &LinkAt::Dir(root.join("l")),
        )
        .expect_err("absent");
        let msg = e.to_string();
        assert!(msg.contains("NCCL not found"), "{msg}");
        assert!(msg.contains("nvidia-nccl-cu12"), "{msg}");
        assert!(msg.contains(&root.display().to_string()), "{msg}");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_link_dir_owned_by_someone_else_or_a_file_is_refused() {
        let root = tree();
        std::fs::write(root.join("libnccl.so.2"), b"x").expect("write");
        let trap = root.join("not-a-dir");
        std::fs::write(&trap, b"").expect("write");
        let e = find_in(&ld_places(&root.display().to_string()), &LinkAt::Dir(trap))
            .expect_err("refused");
        assert!(matches!(e, FindError::Link { .. }), "{e}");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_venv_on_path_but_not_activated_is_searched() {
        let root = tree();
        let venv = root.join("opt/torch/.venv");
        let lib_dir = venv.join("lib/python3.12/site-packages/nvidia/nccl/lib");
        std::fs::create_dir_all(&lib_dir).expect("mkdir");
        std::fs::create_dir_all(venv.join("bin")).expect("mkdir");
        std::fs::write(lib_dir.join("libnccl.so.2"), b"x").expect("write");
        let env = Env {
            path: Some(format!(
                "/usr/local/sbin:{}:/usr/bin",
                venv.join("bin").display()
            )),
            ..Env::default()
        };
        let ps = places(&env);
        let f = find_in(&ps, &LinkAt::Dir(root.join("l"))).expect("found through PATH");
        assert_eq!(
            f.lib,
            std::fs::canonicalize(lib_dir.join("libnccl.so.2")).expect("canon")
        );
        assert!(f.how.contains(".venv"), "{f:?}");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn only_the_invoking_users_own_python_prefixes_are_searched() {
        let env = Env {
            path: Some("/home/me/venv/bin:/usr/bin:relative/bin:/sbin".into()),
            virtual_env: Some("/work/venv".into()),
            conda_prefix: None,
            home: Some("/home/me".into()),
            ld_library_path: None,
        };
        let want: Vec<PathBuf> = [
            "/work/venv",
            "/home/me/venv",
            "/usr",
            "/usr/local",
            "/opt/conda",
            "/home/me/.local",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        // No /home/* of other users, no /root unless it is HOME.
        assert_eq!(python_prefixes(&env), want);
    }

    #[test]
    fn a_library_others_can_write_is_refused_saying_why() {
        use std::os::unix::fs::PermissionsExt;
        let root = tree();
        let dir = root.join("shared");
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("libnccl.so.2"), b"x").expect("write");
        let places = ld_places(&dir.display().to_string());
        let link = LinkAt::Dir(root.join("l"));
        std::fs::set_permissions(
            dir.join("libnccl.so.2"),
            std::fs::Permissions::from_mode(0o666),
        )
        .expect("chmod");
        let e = find_in(&places, &link).expect_err("world-writable file");
        assert!(matches!(e, FindError::Untrusted { .. }), "{e}");
        assert!(e.to_string().contains("writable by every user"), "{e}");
        std::fs::set_permissions(
            dir.join("libnccl.so.2"),
            std::fs::Permissions::from_mode(0o644),
        )
        .expect("chmod");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let e = find_in(&places, &link).expect_err("world-writable folder");
        assert!(e.to_string().contains("folder"), "{e}");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        find_in(&places, &link).expect("fine once only its owner can write");
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            // As root: a library that belongs to another user (nobody) is refused too.
            std::os::unix::fs::chown(dir.join("libnccl.so.2"), Some(65534), None).expect("chown");
            let e = find_in(&places, &link).expect_err("another user's file");
            assert!(e.to_string().contains("uid 65534"), "{e}");
        } else {
            eprintln!("not root: the other-owner case needs chown; checked the permission cases");
        }
        let _ = std::fs::remove_dir_all(&root);
    }

    /// The search refuses a library others could have written; the same file named in
    /// RINGLAB_NCCL_LIB is the user's choice: loaded (through its descriptor), with a warning.
    #[test]
    fn an_explicit_library_the_search_would_refuse_is_loaded_with_a_warning() {
        use std::os::unix::fs::PermissionsExt;
        let root = tree();
        let lib = root.join("libnccl.so.2");
        std::fs::write(&lib, b"shared box").expect("write");
        std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        let link = LinkAt::Dir(root.join("l"));
        let e = find_in(&ld_places(&root.display().to_string()), &link).expect_err("search");
        assert!(matches!(e, FindError::Untrusted { .. }), "{e}");
        let f = find_override(&lib, &link).expect("named, so loaded");
        assert_eq!(f.how, OVERRIDE);
        assert_eq!(
            std::fs::read(f.dir.join("libnccl.so")).expect("through the link"),
            b"shared box"
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn the_override_names_the_file_and_nothing_else() {
        let root = tree();
        std::fs::write(root.join("libnccl.so.2"), b"x").expect("write");
        let link = LinkAt::Dir(root.join("l"));
        let f = find_override(&root.join("libnccl.so.2"), &link).expect("found");
        assert!(f.linked);
        assert_eq!(f.how, OVERRIDE);
        let e = find_override(&root.join("libnccl.so.9"), &link).expect_err("missing");
        assert!(e.to_string().starts_with("RINGLAB_NCCL_LIB="), "{e}");
        let e = find_override(&root, &link).expect_err("a folder");
        assert!(e.to_string().contains("not an NCCL library"), "{e}");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn the_private_link_folder_is_0700_unpredictable_and_removed_after_use() {
        let root = tree();
        std::fs::write(root.join("libnccl.so.2"), b"x").expect("write");
        let places = ld_places(&root.display().to_string());
        let a = find_in(&places, &LinkAt::Private).expect("found");
        let b = find_in(&places, &LinkAt::Private).expect("found");
        assert_ne!(a.dir, b.dir, "a fresh name each time");
        let m = std::fs::metadata(&a.dir).expect("made");
        assert_eq!(m.mode() & 0o777, 0o700);
        assert!(a.dir.join("libnccl.so").exists());
        let dir = a.dir.clone();
        let copy = a.clone();
        drop(a);
        assert!(dir.exists(), "kept while a copy lives");
        drop(copy);
        assert!(!dir.exists(), "removed with the last copy");
        let _ = std::fs::remove_dir_all(&root);
    }
}
