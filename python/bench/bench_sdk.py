"""make bench-sdk: what the Python SDK costs, against baselines measured in
the same run, for each interpreter found (python3 on PATH and
/usr/bin/python3):

- startup: `python3 -c 'import sky'` against `python3 -c pass` (median
  wall time of N runs, interleaved); the goal is import <= 50 ms;
- round trip: `sky.get(sky.status())` against a direct HTTP GET
  /api/health, both from the same process, against a private local
  server (temp HOME, free port; the binary is SKYGO_TEST_BINARY or
  bin/sky).

N is SKYGO_BENCH_SDK_RUNS (default 21).
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
GOAL_MS = 50.0


def interpreters():
    seen, out = set(), []
    for p in (shutil.which('python3'), '/usr/bin/python3'):
        if p and os.access(p, os.X_OK) and os.path.realpath(p) not in seen:
            seen.add(os.path.realpath(p))
            out.append(p)
    return out


def wall_ms(argv, env):
    t = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - t) * 1000


def startup(py, n, env):
    """Median wall ms of `-c pass` and `-c 'import sky'`, interleaved so
    that drift in the machine's load hits both alike."""
    base, imp = [], []
    for _ in range(n):
        base.append(wall_ms([py, '-c', 'pass'], env))
        imp.append(wall_ms([py, '-c', 'import sky'], env))
    return statistics.median(base), statistics.median(imp)


def importtime_us(py, env):
    """sky's cumulative import time as -X importtime reports it (us)."""
    r = subprocess.run([py, '-X', 'importtime', '-c', 'import sky'], env=env,
                       capture_output=True, text=True, check=True)
    for line in r.stderr.splitlines():
        parts = [p.strip() for p in line.split('|')]
        if len(parts) == 3 and parts[2] == 'sky':
            return int(parts[1])
    return None


def roundtrip_child(n):
    """Runs in the interpreter under test, with the server's environment:
    median ms of sky.get(sky.status()) and of GET /api/health."""
    import urllib.request

    import sky
    endpoint = 'http://127.0.0.1:%s' % os.environ['SKYPILOT_API_SERVER_LOCAL_PORT']
    sky.get(sky.status())  # first call: health check, version check
    urllib.request.urlopen(endpoint + '/api/health').read()
    sdk, raw = [], []
    for _ in range(n):
        t = time.perf_counter()
        sky.get(sky.status())
        sdk.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        with urllib.request.urlopen(endpoint + '/api/health') as r:
            json.loads(r.read())
        raw.append((time.perf_counter() - t) * 1000)
    print(json.dumps({'sdk': statistics.median(sdk), 'health': statistics.median(raw)}))


def main():
    n = int(os.environ.get('SKYGO_BENCH_SDK_RUNS', '21'))
    sys.path.insert(0, os.path.join(REPO, 'python', 'tests'))
    import seed_server
    binary = seed_server.sky_binary()
    if binary is None:
        sys.exit('no sky binary: run `make build` or set SKYGO_TEST_BINARY')
    srv = seed_server.LocalServer(binary).start()
    try:
        env = dict(srv.env)
        print('SDK benchmark: %d runs each, medians; server %s (%s)' % (n, srv.endpoint, binary))
        for py in interpreters():
            ver = subprocess.run([py, '-c', 'import sys; print(sys.version.split()[0])'],
                                 capture_output=True, text=True).stdout.strip()
            base, imp = startup(py, n, env)
            it = importtime_us(py, env)
            cost = imp - base
            print('%s (Python %s)' % (py, ver))
            print('  python3 -c pass          %7.1f ms' % base)
            print("  python3 -c 'import sky'  %7.1f ms   ratio %.2fx; import alone %.1f ms "
                  '(-X importtime: %s ms) -> %s (goal <= %.0f ms)'
                  % (imp, imp / base, cost, '%.1f' % (it / 1000) if it else '?',
                     'ok' if cost <= GOAL_MS else 'OVER', GOAL_MS))
            r = subprocess.run([py, os.path.abspath(__file__), '--roundtrip', str(n)], env=env,
                               capture_output=True, text=True)
            if r.returncode != 0:
                print('  round trip failed:\n' + r.stderr)
                continue
            rt = json.loads(r.stdout)
            print('  GET /api/health          %7.2f ms' % rt['health'])
            print('  sky.get(sky.status())    %7.2f ms   ratio %.1fx' % (rt['sdk'], rt['sdk'] / rt['health']))
    finally:
        problems = srv.stop()
        if problems:
            print('cleanup: ' + '; '.join(problems), file=sys.stderr)


if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[1] == '--roundtrip':
        roundtrip_child(int(sys.argv[2]))
    else:
        main()
