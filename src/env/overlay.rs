//! A copy-on-write overlay over another [`Disk`]: reads fall through to the base disk, every
//! change (writes, length changes, creations, renames, removals, directories) stays in memory.
//!
//! It lets code that writes as part of opening a database (recovery zeroes a torn tail, lowers
//! checkpoints, removes leftovers) run against files that must not change: `annal backup verify`
//! opens a backup through it exactly as a restored node would, and the backup is left as it was.
//!
//! Invariants: nothing is ever written to, created in, renamed in or removed from the base disk;
//! the base is only opened [`OpenMode::Read`]. Within the overlay the usual file semantics hold:
//! every handle of one path sees the same bytes, a rename moves the file (with its changes), and a
//! removed path reads as absent even though the base still holds it. Changed bytes are kept per
//! 4 KiB page, so memory grows with what was changed, not with file sizes. Sync calls do nothing
//! (there is nothing durable to make).

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{Disk, File, OpenMode};

const PAGE: u64 = 4096;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{}: not found", path.display()))
}

/// What the overlay knows about a path.
enum Entry {
    /// Removed (or renamed away) in the overlay.
    Removed,
    /// A file whose bytes the overlay serves.
    File(Arc<OverlayFile>),
}

/// The overlay disk. See the module documentation.
pub struct OverlayDisk {
    base: Arc<dyn Disk>,
    entries: Mutex<BTreeMap<PathBuf, Entry>>,
    dirs: Mutex<BTreeSet<PathBuf>>,
}

impl OverlayDisk {
    /// An overlay over `base` with no changes yet.
    pub fn new(base: Arc<dyn Disk>) -> OverlayDisk {
        OverlayDisk { base, entries: Mutex::new(BTreeMap::new()), dirs: Mutex::new(BTreeSet::new()) }
    }

    /// Bytes of changed pages held in memory.
    pub fn changed_bytes(&self) -> u64 {
        lock(&self.entries)
            .values()
            .map(|e| match e {
                Entry::File(f) => lock(&f.state).pages.len() as u64 * PAGE,
                Entry::Removed => 0,
            })
            .sum()
    }

    /// The overlay file for `path`, wrapping the base file on first use (`None`: absent).
    fn resolve(
        &self,
        entries: &mut BTreeMap<PathBuf, Entry>,
        path: &Path,
    ) -> io::Result<Option<Arc<OverlayFile>>> {
        match entries.get(path) {
            Some(Entry::File(f)) => Ok(Some(f.clone())),
            Some(Entry::Removed) => Ok(None),
            None => {
                if !self.base.exists(path) {
                    return Ok(None);
                }
                let base = self.base.open(path, OpenMode::Read)?;
                let len = base.len()?;
                let f = Arc::new(OverlayFile {
                    base: Some(base),
                    state: Mutex::new(FileState { len, base_limit: len, pages: BTreeMap::new() }),
                });
                entries.insert(path.to_path_buf(), Entry::File(f.clone()));
                Ok(Some(f))
            }
        }
    }
}

struct FileState {
    /// Current length.
    len: u64,
    /// Base bytes at or past this offset read as zeros (the file was shortened below them).
    base_limit: u64,
    /// Changed pages, by page number.
    pages: BTreeMap<u64, Box<[u8]>>,
}

/// One file of the overlay: base bytes under changed pages.
struct OverlayFile {
    base: Option<Arc<dyn File>>,
    state: Mutex<FileState>,
}

impl OverlayFile {
    fn empty() -> OverlayFile {
        OverlayFile {
            base: None,
            state: Mutex::new(FileState { len: 0, base_limit: 0, pages: BTreeMap::new() }),
        }
    }

    /// Reads page `n` as it is now, from the base where it was not changed.
    fn page(&self, st: &FileState, n: u64) -> io::Result<Box<[u8]>> {
        if let Some(p) = st.pages.get(&n) {
            return Ok(p.clone());
        }
        let mut p = vec![0u8; PAGE as usize].into_boxed_slice();
        let start = n * PAGE;
        if let Some(base) = &self.base {
            let end = (start + PAGE).min(st.base_limit);
            if end > start {
                base.read_exact_at(&mut p[..(end - start) as usize], start)?;
            }
        }
        Ok(p)
    }
}

struct Handle {
    file: Arc<OverlayFile>,
    writable: bool,
}

impl File for Handle {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let st = lock(&self.file.state);
        if offset >= st.len {
            return Ok(0);
        }
        let n = (buf.len() as u64).min(st.len - offset) as usize;
        let mut done = 0usize;
        while done < n {
            let at = offset + done as u64;
            let page_no = at / PAGE;
            let in_page = (at % PAGE) as usize;
            let take = (PAGE as usize - in_page).min(n - done);
            match st.pages.get(&page_no) {
                Some(p) => buf[done..done + take].copy_from_slice(&p[in_page..in_page + take]),
                None => {
                    // Unchanged: read the whole unchanged run from the base in one call.
                    let mut run_end = at + take as u64;
                    while run_end < offset + n as u64 && !st.pages.contains_key(&(run_end / PAGE)) {
                        run_end = (run_end + PAGE - run_end % PAGE).min(offset + n as u64);
                    }
                    let run = (run_end - at) as usize;
                    let from_base = st.base_limit.saturating_sub(at).min(run as u64) as usize;
                    if from_base > 0 {
                        let base =
                            self.file.base.as_ref().ok_or_else(|| io::Error::other("overlay: no base"))?;
                        base.read_exact_at(&mut buf[done..done + from_base], at)?;
                    }
                    buf[done + from_base..done + run].fill(0);
                    done += run;
                    continue;
                }
            }
            done += take;
        }
        Ok(n)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if !self.writable {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, "file opened read-only"));
        }
        let mut st = lock(&self.file.state);
        let mut done = 0usize;
        while done < buf.len() {
            let at = offset + done as u64;
            let page_no = at / PAGE;
            let in_page = (at % PAGE) as usize;
            let take = (PAGE as usize - in_page).min(buf.len() - done);
            let mut p = self.file.page(&st, page_no)?;
            p[in_page..in_page + take].copy_from_slice(&buf[done..done + take]);
            st.pages.insert(page_no, p);
            done += take;
        }
        st.len = st.len.max(offset + buf.len() as u64);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        if !self.writable {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, "file opened read-only"));
        }
        let mut st = lock(&self.file.state);
        if len < st.len {
            // Bytes past the new end read as zeros if the file grows again.
            let keep = len.div_ceil(PAGE);
            st.pages.retain(|&n, _| n < keep);
            if len % PAGE != 0 {
                let n = len / PAGE;
                let mut p = self.file.page(&st, n)?;
                p[(len % PAGE) as usize..].fill(0);
                st.pages.insert(n, p);
            }
            st.base_limit = st.base_limit.min(len);
        }
        st.len = len;
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(lock(&self.file.state).len)
    }
}

impl Disk for OverlayDisk {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn File>> {
        let mut entries = lock(&self.entries);
        let file = match (mode, self.resolve(&mut entries, path)?) {
            (OpenMode::Read | OpenMode::ReadWrite, Some(f)) => f,
            (OpenMode::Read | OpenMode::ReadWrite, None) => return Err(not_found(path)),
            (OpenMode::CreateNew, Some(_)) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{}: exists", path.display()),
                ))
            }
            (OpenMode::CreateTruncate, Some(f)) => {
                let mut st = lock(&f.state);
                st.len = 0;
                st.base_limit = 0;
                st.pages.clear();
                drop(st);
                f
            }
            (OpenMode::CreateNew | OpenMode::CreateTruncate, None) => {
                let parent = super::parent(path);
                let parent_exists = match entries.get(parent) {
                    Some(Entry::File(_)) => false,
                    Some(Entry::Removed) => false,
                    None => lock(&self.dirs).contains(parent) || self.base.exists(parent),
                };
                if !parent_exists && parent != Path::new(".") {
                    return Err(not_found(parent));
                }
                let f = Arc::new(OverlayFile::empty());
                entries.insert(path.to_path_buf(), Entry::File(f.clone()));
                f
            }
        };
        Ok(Arc::new(Handle { file, writable: mode != OpenMode::Read }))
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut dirs = lock(&self.dirs);
        let mut p = Some(path);
        while let Some(d) = p {
            if d.as_os_str().is_empty() {
                break;
            }
            dirs.insert(d.to_path_buf());
            p = d.parent();
        }
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut entries = lock(&self.entries);
        let f = self.resolve(&mut entries, from)?.ok_or_else(|| not_found(from))?;
        entries.insert(from.to_path_buf(), Entry::Removed);
        entries.insert(to.to_path_buf(), Entry::File(f));
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut entries = lock(&self.entries);
        self.resolve(&mut entries, path)?.ok_or_else(|| not_found(path))?;
        entries.insert(path.to_path_buf(), Entry::Removed);
        Ok(())
    }

    fn sync_dir(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut out = match self.base.list(dir) {
            Ok(names) => names,
            Err(e) if e.kind() == io::ErrorKind::NotFound && lock(&self.dirs).contains(dir) => Vec::new(),
            Err(e) => return Err(e),
        };
        let entries = lock(&self.entries);
        out.retain(|n| !matches!(entries.get(&dir.join(n)), Some(Entry::Removed)));
        for (p, e) in entries.iter() {
            if let (Entry::File(_), Some(parent), Some(name)) = (e, p.parent(), p.file_name()) {
                if parent == dir {
                    out.push(name.to_string_lossy().into_owned());
                }
            }
        }
        for d in lock(&self.dirs).iter() {
            if let (Some(parent), Some(name)) = (d.parent(), d.file_name()) {
                if parent == dir {
                    out.push(name.to_string_lossy().into_owned());
                }
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    fn exists(&self, path: &Path) -> bool {
        match lock(&self.entries).get(path) {
            Some(Entry::File(_)) => true,
            Some(Entry::Removed) => false,
            None => lock(&self.dirs).contains(path) || self.base.exists(path),
        }
    }

    fn space(&self, path: &Path) -> Option<(u64, u64)> {
        self.base.space(path)
    }

    fn create_zeroed(&self, path: &Path, len: u64) -> io::Result<Arc<dyn File>> {
        // Zeros need no pages: a file extended by `set_len` reads as zeros.
        let f = self.open(path, OpenMode::CreateTruncate)?;
        f.set_len(len)?;
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::mem::MemDisk;

    fn base_with(path: &str, bytes: &[u8]) -> Arc<MemDisk> {
        let d = Arc::new(MemDisk::default());
        d.create_dir_all(Path::new("/b")).unwrap();
        let f = d.open(Path::new(path), OpenMode::CreateNew).unwrap();
        f.write_all_at(bytes, 0).unwrap();
        d
    }

    fn read_all(d: &dyn Disk, path: &str) -> Vec<u8> {
        let f = d.open(Path::new(path), OpenMode::Read).unwrap();
        let mut v = vec![0u8; f.len().unwrap() as usize];
        f.read_exact_at(&mut v, 0).unwrap();
        v
    }

    #[test]
    fn changes_stay_in_the_overlay() {
        let data: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let base = base_with("/b/f", &data);
        let o = OverlayDisk::new(base.clone());
        let f = o.open(Path::new("/b/f"), OpenMode::ReadWrite).unwrap();
        f.write_all_at(&[0xAA; 10], 4090).unwrap();
        let mut expect = data.clone();
        expect[4090..4100].fill(0xAA);
        assert_eq!(read_all(&o, "/b/f"), expect);
        assert_eq!(read_all(&*base, "/b/f"), data, "the base is unchanged");
        f.set_len(5000).unwrap();
        f.set_len(9000).unwrap();
        let now = read_all(&o, "/b/f");
        assert_eq!(&now[..5000], &expect[..5000]);
        assert!(now[5000..].iter().all(|&b| b == 0), "bytes past a shortening read as zeros");
        o.rename(Path::new("/b/f"), Path::new("/b/g")).unwrap();
        assert!(!o.exists(Path::new("/b/f")) && o.exists(Path::new("/b/g")));
        assert_eq!(o.list(Path::new("/b")).unwrap(), vec!["g".to_string()]);
        assert_eq!(base.list(Path::new("/b")).unwrap(), vec!["f".to_string()]);
        o.remove(Path::new("/b/g")).unwrap();
        assert!(o.list(Path::new("/b")).unwrap().is_empty());
        o.create_dir_all(Path::new("/b/sub")).unwrap();
        o.open(Path::new("/b/sub/x"), OpenMode::CreateNew).unwrap().write_all_at(b"x", 0).unwrap();
        assert_eq!(read_all(&o, "/b/sub/x"), b"x");
        assert!(!base.exists(Path::new("/b/sub")));
    }
}
