"""Upload of a task's local files to the API server (upload_v2).

The same protocol and rules as the Go CLI (internal/client/upload.go,
internal/upload/{manifest,ignore}.go): the sources go in a tree under the
roots ``workdir`` and ``mounts/<i>`` (i indexing the sorted file-mount
destinations), .skyignore (else .gitignore files) leave paths out, each
file is described by size, mode and sha256, the server names the blobs it
lacks, small ones travel many to a tar PUT and big ones in chunks that
resume where a cut-off upload stopped, and the commit returns the tree id
the task then names (upload_id).
"""
from __future__ import annotations

import io
import os
import re
import stat
import time
TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs ms at import
    from typing import Any, Callable, Dict, List, Optional, Tuple

from sky import exceptions

WORKDIR_ROOT = 'workdir'
SKYIGNORE = '.skyignore'
GITIGNORE = '.gitignore'

PATH_LIMITS = '/upload_v2/limits'
PATH_UPLOAD = '/upload_v2'
PATH_BLOB = '/upload_v2/blob'
PATH_COMMIT = '/upload_v2/commit'
PATH_BATCH = '/upload_v2/batch'

DEFAULT_CHUNK_BYTES = 8 << 20
# Batches of small blobs: up to BATCH_MAX_BLOBS files or BATCH_MAX_BYTES,
# each at most BATCH_BLOB_MAX (internal/client/upload.go).
BATCH_BLOB_MAX = 1 << 20
BATCH_MAX_BYTES = 8 << 20
BATCH_MAX_BLOBS = 512
CHUNK_RETRIES = 3
UPLOAD_WORKERS = 4
ENV_LIMIT = 'SKYGO_UPLOAD_LIMIT'


def mount_root(i: int) -> str:
    return f'mounts/{i}'


def human_bytes(n: int) -> str:
    if n < 1024:
        return f'{n} B'
    div, exp, m = 1024, 0, n // 1024
    while m >= 1024:
        div *= 1024
        exp += 1
        m //= 1024
    return f'{n / div:.1f} {"KMGTPE"[exp]}iB'


# ---- ignore rules (internal/upload/ignore.go) ----


def _glob_to_regexp(g: str) -> str:
    out = []
    i = 0
    n = len(g)
    while i < n:
        c = g[i]
        if g.startswith('**/', i):
            out.append('(?:.*/)?')
            i += 3
            continue
        if g.startswith('/**', i) and i + 3 == n:
            out.append('/.*')
            i += 3
            continue
        if g.startswith('**', i):
            out.append('.*')
            i += 2
            continue
        if c == '*':
            out.append('[^/]*')
        elif c == '?':
            out.append('[^/]')
        elif c == '\\' and i + 1 < n:
            i += 1
            out.append(re.escape(g[i]))
        elif c == '[':
            j = g.find(']', i + 1)
            if j < 0:
                out.append(r'\[')
            else:
                cls = g[i + 1:j]
                if cls.startswith('!'):
                    cls = '^' + cls[1:]
                out.append('[' + cls.replace('\\', '\\\\') + ']')
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    return ''.join(out)


def parse_rule(line: str) -> Optional[Tuple[Any, bool, bool]]:
    """(regexp, negate, dir_only) of one gitignore line, or None."""
    line = line.rstrip(' \t\r')
    if not line or line.startswith('#'):
        return None
    negate = dir_only = False
    if line.startswith('!'):
        negate, line = True, line[1:]
    elif line.startswith('\\'):
        line = line[1:]  # "\#x" and "\!x" are literal
    if line.endswith('/'):
        dir_only, line = True, line.rstrip('/')
    if not line:
        return None
    anchored = '/' in line
    if line.startswith('/'):
        line = line[1:]
    if not anchored:
        line = '**/' + line
    try:
        rx = re.compile(_glob_to_regexp(line), re.DOTALL)
    except re.error:
        return None
    return rx, negate, dir_only


def _read_rules(path: str, base: str):
    try:
        with open(path, encoding='utf-8', errors='replace') as f:
            text = f.read()
    except FileNotFoundError:
        return None
    rules = [r for r in (parse_rule(l) for l in text.split('\n'))
             if r is not None]
    return base, rules


class Ignore:
    """Which paths under one root are left out: .skyignore at the root,
    else .git/info/exclude, the root's .gitignore and each directory's
    .gitignore as the walk reaches it."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.sets: List[Tuple[str, list]] = []
        self.git = False
        sky = _read_rules(os.path.join(root, SKYIGNORE), '')
        if sky is not None:
            self.sets.append(sky)
            return
        self.git = True
        for f in (os.path.join(root, '.git', 'info', 'exclude'),
                  os.path.join(root, GITIGNORE)):
            rs = _read_rules(f, '')
            if rs is not None:
                self.sets.append(rs)

    def enter_dir(self, rel: str) -> None:
        if not self.git or not rel:
            return
        rs = _read_rules(os.path.join(self.root, *rel.split('/'), GITIGNORE),
                         rel)
        if rs is not None:
            self.sets.append(rs)

    def match(self, rel: str, is_dir: bool) -> bool:
        """The last matching pattern wins; nothing below an ignored
        directory is visited, so nothing there can be re-included."""
        ignored = False
        for base, rules in self.sets:
            sub = rel
            if base:
                if not rel.startswith(base + '/'):
                    continue
                sub = rel[len(base) + 1:]
            for rx, negate, dir_only in rules:
                if dir_only and not is_dir:
                    continue
                if rx.fullmatch(sub):
                    ignored = not negate
        return ignored


# ---- scan (internal/upload/manifest.go) ----


class Scanned:
    """A manifest and where each blob's bytes are on this machine."""

    def __init__(self) -> None:
        self.entries: List[Dict[str, Any]] = []
        self.local: Dict[str, str] = {}
        self.files = 0
        self.bytes = 0
        # Files read to hash them; the others the cache knew unchanged.
        self.hashed = 0

    @property
    def manifest(self) -> Dict[str, Any]:
        return {'entries': self.entries}


def _file_entry(name: str, st: os.stat_result) -> Dict[str, Any]:
    e: Dict[str, Any] = {'path': name, 'type': 'file',
                         'mode': stat.S_IMODE(st.st_mode) & 0o777}
    if st.st_size:
        e['size'] = st.st_size
    return e


def _walk_root(name: str, source: str,
               add: Callable[[Dict[str, Any], str, int], None]) -> None:
    try:
        st = os.stat(source)  # follows links: a missing target fails here
        src = os.path.realpath(source)
    except OSError as e:
        raise ValueError(f'{source}: {e.strerror or e}') from e
    if not stat.S_ISDIR(st.st_mode):
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f'{source} is neither a regular file nor a '
                             'directory; only those can be uploaded')
        add(_file_entry(name, st), source, st.st_size)
        return
    ig = Ignore(src)
    add({'path': name, 'type': 'dir', 'mode': stat.S_IMODE(st.st_mode) & 0o777},
        src, 0)

    def walk(dir_path: str, rel: str) -> None:
        try:
            with os.scandir(dir_path) as it:
                ents = sorted(it, key=lambda d: d.name)
        except OSError as e:
            raise ValueError(f'{dir_path}: {e.strerror or e}') from e
        for d in ents:
            r = d.name if not rel else rel + '/' + d.name
            p = d.path
            try:
                lst = os.lstat(p)
            except OSError as e:
                raise ValueError(f'{p}: {e.strerror or e}') from e
            is_dir = stat.S_ISDIR(lst.st_mode)
            if ig.match(r, is_dir):
                continue
            entry_name = name + '/' + r
            if is_dir:
                add({'path': entry_name, 'type': 'dir',
                     'mode': stat.S_IMODE(lst.st_mode) & 0o777}, p, 0)
                ig.enter_dir(r)
                walk(p, r)
            elif stat.S_ISLNK(lst.st_mode):
                add({'path': entry_name, 'type': 'symlink', 'mode': 0o777,
                     'link': os.readlink(p)}, p, 0)
            elif stat.S_ISREG(lst.st_mode):
                add(_file_entry(entry_name, lst), p, lst.st_size)
            # Sockets, devices and pipes are not files to ship (rsync -a
            # without --devices/--specials skips them too).

    walk(src, '')


def hash_file(path: str) -> str:
    import hashlib  # pylint: disable=import-outside-toplevel
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


class HashCache:
    """The sha256 of local files by what stat says of them (size, mtime,
    ctime, inode), so that a re-launch of unchanged files hashes nothing.
    It is the Go client's cache (internal/upload/cache.go): the same file
    under ~/.sky/skygo and the same format, so a file the CLI hashed is
    not hashed again by the SDK, nor the other way round. Any write moves
    the ctime, so a changed file is never taken for its old self."""

    KEEP_SECONDS = 30 * 24 * 3600
    MAX_ENTRIES = 300_000

    def __init__(self, path: str) -> None:
        self.path = path
        self.m: Dict[str, Dict[str, Any]] = {}
        try:
            import json  # pylint: disable=import-outside-toplevel
            with open(path, encoding='utf-8') as f:
                m = json.load(f)
            if isinstance(m, dict):
                self.m = m
        except (OSError, ValueError):
            pass  # only a cache: missing or broken is empty

    @staticmethod
    def _key(st: os.stat_result) -> Dict[str, Any]:
        return {'s': st.st_size, 'm': st.st_mtime_ns, 'c': st.st_ctime_ns,
                'i': st.st_ino}

    def lookup(self, path: str, st: os.stat_result) -> Optional[str]:
        e = self.m.get(path)
        if not isinstance(e, dict) or not e.get('h'):
            return None
        k = self._key(st)
        if any(e.get(f) != v for f, v in k.items()):
            return None
        e['t'] = int(time.time())
        return e['h']

    def store(self, path: str, st: os.stat_result, sha: str) -> None:
        e = self._key(st)
        e['h'], e['t'] = sha, int(time.time())
        self.m[path] = e

    def save(self) -> None:
        """Writes the cache atomically (entries no scan met for a month
        dropped, the most recently met kept past the size bound)."""
        import json  # pylint: disable=import-outside-toplevel
        old = int(time.time()) - self.KEEP_SECONDS
        m = {p: e for p, e in self.m.items()
             if isinstance(e, dict) and int(e.get('t') or 0) >= old}
        if len(m) > self.MAX_ENTRIES:
            keep = sorted(m, key=lambda p: m[p].get('t') or 0,
                          reverse=True)[:self.MAX_ENTRIES]
            m = {p: m[p] for p in keep}
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            tmp = f'{self.path}.{os.getpid()}.tmp'
            with open(tmp, 'w', encoding='utf-8') as f:
                json.dump(m, f, separators=(',', ':'))
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except OSError:
            pass  # a launch does not fail for want of a cache


def scan(roots: List[Tuple[str, str]], limit: int = 0,
         cache: Optional[HashCache] = None) -> Scanned:
    """Walks the roots (ignore rules applied, symlinks kept as links),
    refuses more than limit bytes (0: no limit) before reading a file,
    then hashes the files the cache does not know unchanged."""
    s = Scanned()
    files: List[Tuple[int, str]] = []
    largest = ['', -1]

    def add(e: Dict[str, Any], src: str, size: int) -> None:
        if e['type'] == 'file':
            files.append((len(s.entries), src))
            s.files += 1
            s.bytes += size
            if size > largest[1]:
                largest[0], largest[1] = src, size
        s.entries.append(e)

    for name, source in roots:
        _walk_root(name, source, add)
    if limit > 0 and s.bytes > limit:
        raise ValueError(
            f'the workdir and file mounts to upload to the API server total '
            f'{human_bytes(s.bytes)}, more than its limit of '
            f'{human_bytes(limit)}; the largest file is {largest[0]} '
            f'({human_bytes(int(largest[1]))}): add it to .skyignore (or '
            '.gitignore) in its directory, put large data in a bucket and '
            'mount it from there (file_mounts: {/data: s3://...}), or raise '
            f"the server's limit ({ENV_LIMIT}=8GiB where `sky api start` "
            'runs)')
    for idx, src in files:
        st = os.stat(src) if cache is not None else None
        sha = cache.lookup(src, st) if cache is not None else None
        if sha is None:
            sha = hash_file(src)
            s.hashed += 1
            if cache is not None:
                cache.store(src, st, sha)
        s.entries[idx]['sha256'] = sha
        s.local[sha] = src
    return s


# ---- transfer (internal/client/upload.go) ----


def _batch_tar(s: Scanned, blobs: List[Dict[str, Any]]) -> bytes:
    import tarfile  # pylint: disable=import-outside-toplevel
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode='w', format=tarfile.PAX_FORMAT) as tw:
        for b in blobs:
            p = s.local[b['sha256']]
            with open(p, 'rb') as f:
                data = f.read()
            if len(data) != b['size']:
                raise ValueError(
                    f'{p} changed while it was being uploaded (size '
                    f'{len(data)}, was {b["size"]}); run the command again')
            ti = tarfile.TarInfo(b['sha256'])
            ti.size = b['size']
            ti.mode = b.get('mode', 0o644)
            ti.type = tarfile.REGTYPE
            tw.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def _transient(e: BaseException) -> bool:
    if isinstance(e, exceptions.ApiServerError):
        return e.status_code >= 500 or e.status_code == 0
    return isinstance(e, (exceptions.ApiServerConnectionError, OSError))


def _send_batch(client, s: Scanned, blobs: List[Dict[str, Any]]) -> int:
    total = sum(b['size'] for b in blobs)
    err: Optional[BaseException] = None
    for attempt in range(CHUNK_RETRIES + 1):
        if attempt:
            time.sleep(attempt * 0.2)
        body = _batch_tar(s, blobs)
        try:
            client.request('PUT', PATH_BATCH, raw=body).json()
            return total
        except Exception as e:  # pylint: disable=broad-except
            err = e
            if not _transient(e):
                break
    first = s.local[blobs[0]['sha256']]
    raise exceptions.SkyPilotError(
        f'uploading {len(blobs)} files (the first {first}): {err}') from err


def _send_blob(client, path: str, b: Dict[str, Any], chunk: int) -> int:
    off, sent, failures = int(b.get('have') or 0), 0, 0
    size = int(b['size'])
    q = {'sha256': b['sha256'], 'size': str(size),
         'mode': format(int(b.get('mode') or 0), 'o')}
    with open(path, 'rb') as f:
        while True:
            f.seek(off)
            data = f.read(min(chunk, size - off))
            q['offset'] = str(off)
            try:
                res = client.request('PUT', PATH_BLOB, query=q,
                                     raw=data).json() or {}
            except Exception as e:  # pylint: disable=broad-except
                conflict = isinstance(e, exceptions.ApiServerError) and \
                    e.status_code == 409
                failures += 1
                if not (conflict or _transient(e)) or \
                        failures > CHUNK_RETRIES:
                    raise exceptions.SkyPilotError(
                        f'uploading {path}: {e}') from e
                time.sleep(failures * 0.2)
                try:
                    have = client.request('GET', PATH_BLOB,
                                          query=q).json() or {}
                except Exception:  # pylint: disable=broad-except
                    continue
                if have.get('complete'):
                    return sent
                off = int(have.get('have') or 0)
                continue
            sent += len(data)
            if res.get('complete'):
                return sent
            have = int(res.get('have') or 0)
            if have <= off:
                raise exceptions.SkyPilotError(
                    f'uploading {path}: the API server took no bytes at '
                    f'offset {off}')
            off = have


def upload(client, roots: List[Tuple[str, str]]) -> Dict[str, Any]:
    """Sends the local sources of roots (name, absolute path) and returns
    {'id', 'files', 'bytes', 'sent', 'sent_bytes', 'hashed', 'took'}."""
    start = time.monotonic()
    try:
        limits = client.call_json('GET', PATH_LIMITS) or {}
    except exceptions.ApiServerError as e:
        if e.status_code == 404:
            raise exceptions.NotSupportedError(
                f'the API server at {client.endpoint} cannot receive files '
                '(it predates uploads); upgrade it to send a workdir or '
                'local file mounts') from e
        raise
    from sky.client import transport  # pylint: disable=import-outside-toplevel
    cache = HashCache(transport.upload_hashes_path(client.home))
    s = scan(roots, int(limits.get('max_bytes') or 0), cache)
    cache.save()
    needs = client.call_json('POST', PATH_UPLOAD, body=s.manifest) or {}
    missing = needs.get('missing') or []
    chunk = int(limits.get('chunk_bytes') or 0) or DEFAULT_CHUNK_BYTES
    per_blob: Dict[str, int] = {}
    for e in s.entries:
        if e['type'] == 'file':
            per_blob[e['sha256']] = per_blob.get(e['sha256'], 0) + 1
    small = min(chunk, BATCH_BLOB_MAX)
    jobs: List[Tuple[str, List[Dict[str, Any]]]] = []
    batch: List[Dict[str, Any]] = []
    batch_bytes = 0
    for b in missing:
        if (b.get('have') or 0) > 0 or b['size'] > small:
            jobs.append(('blob', [b]))
            continue
        if batch and (batch_bytes + b['size'] > BATCH_MAX_BYTES or
                      len(batch) >= BATCH_MAX_BLOBS):
            jobs.append(('batch', batch))
            batch, batch_bytes = [], 0
        batch.append(b)
        batch_bytes += b['size']
    if batch:
        jobs.append(('batch', batch))

    def run(job):
        kind, blobs = job
        if kind == 'blob':
            return _send_blob(client, s.local[blobs[0]['sha256']], blobs[0],
                              chunk), blobs
        return _send_batch(client, s, blobs), blobs

    sent = sent_bytes = 0
    if len(jobs) == 1:
        results = [run(jobs[0])]
    elif jobs:
        # Blobs travel a few at once to hide the round trips of many
        # files; the first error stops the upload.
        from concurrent.futures import ThreadPoolExecutor  # pylint: disable=import-outside-toplevel
        with ThreadPoolExecutor(min(UPLOAD_WORKERS, len(jobs))) as pool:
            results = list(pool.map(run, jobs))
    else:
        results = []
    for n, blobs in results:
        sent_bytes += n
        sent += sum(per_blob.get(b['sha256'], 0) for b in blobs)
    res = client.call_json('POST', PATH_COMMIT, body=s.manifest) or {}
    return {'id': res.get('id', ''), 'files': s.files, 'bytes': s.bytes,
            'hashed': s.hashed,
            'sent': sent, 'sent_bytes': sent_bytes,
            'took': time.monotonic() - start}
