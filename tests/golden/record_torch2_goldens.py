"""Records the torch 2.x / transformers 5 golden files that CI replays without Python.

Recorded with (and refuses other versions unless --any-version is given; update RECORDED_WITH
and rerun when moving on):
  Python 3.11.7, torch 2.15.0+cu132 (the PyPI wheel, run on the CPU), transformers 5.24.0,
  accelerate 1.15.0.

A venv outside the repository, e.g.:
  python3 -m venv ~/.cache/zero/venv-torch2
  pip install --no-deps torch==2.15.0 transformers==5.24.0 accelerate==1.15.0
  pip install filelock typing-extensions sympy networkx jinja2 fsspec numpy \\
      'huggingface-hub<3' pyyaml regex 'tokenizers<0.24' typer safetensors tqdm psutil
  # PyPI has only the CUDA build of torch for Linux x86-64: it imports on a machine without a
  # GPU once its CUDA libraries load (LD_LIBRARY_PATH=/usr/local/cuda/lib64 for the toolkit's,
  # plus pip's nvidia-cufile, nvidia-cusparselt-cu13, nvidia-nvshmem-cu13, nvidia-nccl-cu13).

Usage: LD_LIBRARY_PATH=/usr/local/cuda/lib64 ~/.cache/zero/venv-torch2/bin/python \\
           tests/golden/record_torch2_goldens.py [OUT_DIR (default tests/golden/data)]

Writes into OUT_DIR:
  transformers5_training_arguments.json  TrainingArguments' fields and defaults
      (training_arguments_defaults.py's format), for tests/train/flags_golden_tf5_file_test.
  tcpstore_v2_torchrun.txt  torch's clients talking to torch's TCPStore server through a logging
      proxy during `torchrun --nnodes 1 --nproc-per-node 2` (static rendezvous; the agent and two
      workers that init_process_group("gloo"), all_reduce, barrier and destroy the group), for
      tests/comm/tcp_store_golden_test (replayed against zero's server). torchrun's agent hosts
      its store in-process, where no proxy sees it: here this script hosts torch's server and the
      agent is its client (AGENT), so the host's own polling of the init key is not recorded.
      The dynamic rendezvous (--standalone, --rdzv-backend c10d) is not recorded; its
      COMPARE_SET is in the API transcript.
  tcpstore_v2_api.txt  torch's client making every call of the TCPStore API (not list_keys, whose
      order is the server's hash map's, nor a wait's timeout, CANCEL_WAIT), and a client whose
      first byte is not VALIDATE, the same way: replayed against zero's server, and played by a
      fake server to zero's client.
  launch_environments.txt  what each of 2 processes gets from torchrun --no-python,
      torch.distributed.launch --use-env --no-python, torch.distributed.launch running a script
      (which passes --local-rank=N) and accelerate launch --multi_gpu, for
      tests/train/launch_golden_test.sh: one line per process, tab-separated: the launch line's
      name, the words after the program (the launcher's own and "train"), and the launcher's
      variables as NAME=VALUE words.

Transcript lines (one event each, in the order torch's server saw them):
  open C | close C (the client closed) | shut C (the server closed C)
  quiet C S         the server neither answered nor closed C for S seconds
  send C NAME HEX   one whole query the client sent (NAME: its query type)
  recv C HEX        one whole reply the server sent
  sync C            the proxy sent a PING on C and swallowed its echo: the server has handled
                    everything C sent so far (a query without a reply gives no other sign)
The proxy forwards one query at a time and waits for its reply (or the sync), so each reply
depends only on the lines before it.
"""
import argparse
import collections
import json
import os
import select
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

RECORDED_WITH = {"python": "3.11.7", "torch": "2.15.0+cu132", "transformers": "5.24.0",
                 "accelerate": "1.15.0"}
HERE = os.path.dirname(os.path.abspath(__file__))

# c10d's QueryType (TCPStoreBackend.hpp) from VALIDATE = 0.
QUERIES = ["VALIDATE", "SET", "COMPARE_SET", "GET", "ADD", "CHECK", "WAIT", "GETNUMKEYS",
           "DELETE_KEY", "APPEND", "MULTI_GET", "MULTI_SET", "CANCEL_WAIT", "PING", "QUEUE_PUSH",
           "QUEUE_POP", "QUEUE_LEN", "LIST_KEYS"]
NO_REPLY = {"VALIDATE", "SET", "APPEND", "MULTI_SET", "QUEUE_PUSH"}
DEFERRED = {"WAIT"}  # answered when the keys appear
QUIET_SECONDS = 3


def installed_versions():
    import accelerate
    import torch
    import transformers
    return {"python": "%d.%d.%d" % sys.version_info[:3], "torch": torch.__version__,
            "transformers": transformers.__version__, "accelerate": accelerate.__version__}


def version_line(versions):
    return " ".join(f"{k} {v}" for k, v in versions.items())


class Incomplete(Exception):
    pass


class Reader:
    """Parses c10d's encoding: u64 length + bytes for strings, native little-endian integers."""

    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, n):
        if self.at + n > len(self.data):
            raise Incomplete
        out = self.data[self.at:self.at + n]
        self.at += n
        return out

    def u8(self):
        return self.take(1)[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def string(self):
        return self.take(self.u64())


def parse_query(data):
    """(name, size, argument count) of the first whole query in data; Incomplete if cut."""
    r = Reader(data)
    code = r.u8()
    if code >= len(QUERIES):
        raise SystemExit(f"unknown TCPStore query type {code}: extend QUERIES")
    name, count = QUERIES[code], 0
    if name in ("VALIDATE", "PING"):
        r.take(4)
    elif name in ("SET", "APPEND", "QUEUE_PUSH"):
        r.string(), r.string()
    elif name == "COMPARE_SET":
        r.string(), r.string(), r.string()
    elif name in ("GET", "DELETE_KEY", "QUEUE_POP", "QUEUE_LEN"):
        r.string()
    elif name == "ADD":
        r.string(), r.take(8)
    elif name in ("CHECK", "WAIT", "MULTI_GET"):
        count = r.u64()
        for _ in range(count):
            r.string()
    elif name == "MULTI_SET":
        count = r.u64()
        for _ in range(count):
            r.string(), r.string()
    return name, r.at, count


def reply_size(name, count, data):
    """Size of the whole reply to `name` at the start of data; Incomplete if cut."""
    r = Reader(data)
    if name in ("GET", "COMPARE_SET"):
        r.string()
    elif name == "QUEUE_POP":  # the queue's length before the pop, then the item if there was one
        if struct.unpack("<q", r.take(8))[0] > 0:
            r.string()
    elif name == "LIST_KEYS":
        for _ in range(r.u64()):
            r.string()
    elif name in ("ADD", "GETNUMKEYS", "DELETE_KEY", "QUEUE_LEN"):
        r.take(8)
    elif name in ("CHECK", "WAIT", "CANCEL_WAIT"):
        r.take(1)
    elif name == "PING":
        r.take(4)
    elif name == "MULTI_GET":
        for _ in range(count):
            r.string()
    return r.at


class Connection:
    def __init__(self, number, client, server):
        self.number, self.client, self.server = number, client, server
        self.from_client = b""
        self.from_server = b""
        self.deferred = collections.deque()  # (name, count) awaiting a reply
        self.validated = False
        self.closed = False


class LoggingProxy:
    """Forwards TCPStore clients on `port` to the server at server_port, one query at a time,
    and logs each query and reply (see the module's docstring). It runs in a process of its
    own: torch's store calls may hold the GIL while they wait for the proxy."""

    def __init__(self, server_port):
        import multiprocessing
        context = multiprocessing.get_context("fork")
        self.pipe, child_pipe = context.Pipe()
        self.process = context.Process(target=self.serve, args=(server_port, child_pipe),
                                       daemon=True)
        self.process.start()
        self.port = self.pipe.recv()

    def finish(self):
        """Stops the proxy; returns its lines."""
        time.sleep(0.3)
        self.pipe.send("stop")
        result = self.pipe.recv()
        self.process.join()
        if isinstance(result, str):
            raise SystemExit(f"the logging proxy failed: {result}")
        return result

    def serve(self, server_port, pipe):
        self.server_port = server_port
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.lines, self.connections, self.nonce = [], [], 0x5A000000
        self.control = pipe
        pipe.send(self.listener.getsockname()[1])
        try:
            self.run()
            pipe.send(self.lines)
        except BaseException as error:  # noqa: BLE001 - reported by finish()
            pipe.send(f"{type(error).__name__}: {error}; lines so far:\n" +
                      "\n".join(line[:200] for line in self.lines[-20:]))

    def log(self, *words):
        self.lines.append(" ".join(str(w) for w in words))
        if os.environ.get("ZERO_RECORD_TRACE"):
            print(self.lines[-1][:200], file=sys.stderr, flush=True)

    def read_server(self, connection, size_of, timeout=60.0):
        """Reads one whole reply from the server side; None when the server closed."""
        deadline = time.time() + timeout
        while True:
            try:
                size = size_of(connection.from_server)
                reply = connection.from_server[:size]
                connection.from_server = connection.from_server[size:]
                return reply
            except Incomplete:
                pass
            left = deadline - time.time()
            if left <= 0:
                raise SystemExit(f"no reply from torch's server on connection {connection.number}")
            ready, _, _ = select.select([connection.server], [], [], left)
            if ready:
                data = connection.server.recv(65536)
                if not data:
                    return None
                connection.from_server += data

    def server_closed(self, connection):
        self.log("shut", connection.number)
        connection.closed = True
        connection.client.close()
        connection.server.close()

    def handle_query(self, connection, data):
        if not connection.validated and data[0] != 0:
            # A first query that is not VALIDATE, forwarded by its first byte: the libuv server
            # (torchrun's) ignores the client, the older one drops it.
            self.log("send", connection.number, QUERIES[data[0]], data[:1].hex())
            connection.server.sendall(data[:1])
            ready, _, _ = select.select([connection.server], [], [], QUIET_SECONDS)
            if not ready:
                self.log("quiet", connection.number, QUIET_SECONDS)
            elif connection.server.recv(1) == b"":
                self.server_closed(connection)
            else:
                raise SystemExit("torch's server answered a first query that was not VALIDATE")
            return len(data)
        name, size, count = parse_query(data)
        query = data[:size]
        self.log("send", connection.number, name, query.hex())
        connection.server.sendall(query)
        connection.validated = True
        if name in NO_REPLY:
            self.nonce += 1
            connection.server.sendall(bytes([QUERIES.index("PING")]) + struct.pack("<I", self.nonce))
            echo = self.read_server(connection, lambda d: reply_size("PING", 0, d))
            if echo != struct.pack("<I", self.nonce):
                raise SystemExit(f"sync on connection {connection.number}: echo {echo!r}")
            self.log("sync", connection.number)
        elif name in DEFERRED:
            connection.deferred.append((name, count))
        else:
            reply = self.read_server(connection, lambda d: reply_size(name, count, d))
            if reply is None:
                self.server_closed(connection)
                return size
            self.log("recv", connection.number, reply.hex())
            connection.client.sendall(reply)
        return size

    def drain_deferred(self, grace):
        """Logs the deferred replies (WAIT) that came within `grace` seconds."""
        waiting = [c for c in self.connections if c.deferred and not c.closed]
        if not waiting:
            return
        ready, _, _ = select.select([c.server for c in waiting], [], [], grace)
        for connection in waiting:
            if connection.server not in ready:
                continue
            name, count = connection.deferred[0]
            reply = self.read_server(connection, lambda d: reply_size(name, count, d))
            if reply is None:
                self.server_closed(connection)
                continue
            connection.deferred.popleft()
            self.log("recv", connection.number, reply.hex())
            connection.client.sendall(reply)

    def run(self):
        parent = os.getppid()
        while not self.control.poll() and os.getppid() == parent:
            self.drain_deferred(0.02)
            live = [c for c in self.connections if not c.closed]
            ready, _, _ = select.select([self.listener] + [c.client for c in live], [], [], 0.05)
            if self.listener in ready:
                client, _ = self.listener.accept()
                server = socket.create_connection(("127.0.0.1", self.server_port))
                for s in (client, server):
                    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                connection = Connection(len(self.connections), client, server)
                self.connections.append(connection)
                self.log("open", connection.number)
            for connection in live:
                if connection.client not in ready or connection.closed:
                    continue
                data = connection.client.recv(65536)
                if not data:
                    self.log("close", connection.number)
                    connection.closed = True
                    connection.client.close()
                    connection.server.close()
                    continue
                connection.from_client += data
                while connection.from_client and not connection.closed:
                    try:
                        size = self.handle_query(connection, connection.from_client)
                    except Incomplete:
                        break
                    connection.from_client = connection.from_client[size:]
                    self.drain_deferred(0.02)
        for connection in self.connections:
            if not connection.closed:
                connection.client.close()
                connection.server.close()


def torch_server():
    import torch.distributed as dist
    return dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                         use_libuv=True)


def write_transcript(path, title, versions, lines):
    with open(path, "w") as out:
        out.write(f"# {title}\n# recorded by tests/golden/record_torch2_goldens.py with "
                  f"{version_line(versions)}\n")
        out.write("\n".join(lines) + "\n")


WORKER = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1) * (dist.get_rank() + 1)
dist.all_reduce(t)
assert t.item() == 3, t
dist.barrier()
dist.destroy_process_group()
"""

# torchrun's agent with its static rendezvous store turned into a client of the proxy: torch's
# own agent hosts the server in-process (is_master=True), where no proxy could see its queries.
AGENT = """
import sys
import torch.distributed.elastic.rendezvous.static_tcp_rendezvous as static
real_store = static.TCPStore
def client_store(host, port, world_size, is_master, timeout, **kwargs):
    return real_store(host, port, world_size, False, timeout, **kwargs)
static.TCPStore = client_store
from torch.distributed.run import main
main(sys.argv[1:])
"""


def record_torchrun(out_dir, versions, work):
    server = torch_server()
    proxy = LoggingProxy(server.port)
    worker = os.path.join(work, "worker.py")
    with open(worker, "w") as f:
        f.write(WORKER)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    command = [sys.executable, "-c", AGENT, "--nnodes", "1", "--nproc-per-node", "2",
               "--master-addr", "127.0.0.1", "--master-port", str(proxy.port),
               "--max-restarts", "0", worker]
    done = subprocess.run(command, env=env, timeout=300, capture_output=True, text=True)
    lines = proxy.finish()
    if done.returncode != 0:
        raise SystemExit(f"torchrun failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    write_transcript(os.path.join(out_dir, "tcpstore_v2_torchrun.txt"),
                     "torchrun --nnodes 1 --nproc-per-node 2 (static rendezvous), two gloo "
                     "workers: init_process_group, all_reduce, barrier, destroy_process_group",
                     versions, lines)
    return lines


def record_api(out_dir, versions):
    import datetime
    import torch.distributed as dist
    server = torch_server()
    proxy = LoggingProxy(server.port)
    # A client whose first query is not VALIDATE (zero's probe for PyTorch 1.x: GETNUMKEYS is
    # 1.x's code 6, which is WAIT in 2.x).
    stray = socket.create_connection(("127.0.0.1", proxy.port))
    stray.sendall(bytes([6]))
    stray.settimeout(QUIET_SECONDS + 2)
    try:
        assert stray.recv(16) == b"", "torch's server answered a stray client"
    except TimeoutError:
        pass
    stray.close()
    timeout = datetime.timedelta(seconds=30)
    a = dist.TCPStore("127.0.0.1", proxy.port, is_master=False, timeout=timeout, use_libuv=True)
    b = dist.TCPStore("127.0.0.1", proxy.port, is_master=False, timeout=timeout, use_libuv=True)
    a.set("zero/a", b"1")
    assert a.check(["zero/a"]) and not a.check(["zero/absent"])
    assert not a.check(["zero/a", "zero/absent"])
    a.check(["zero/a"])
    assert a.get("zero/a") == b"1"
    assert a.add("zero/n", 5) == 5 and a.add("zero/n", -2) == 3 and a.add("zero/n", 0) == 3
    a.set("zero/empty", b"")
    a.check(["zero/empty"])
    assert a.get("zero/empty") == b""
    a.set("zero/a", b"\x00\xffbinary")
    a.check(["zero/a"])
    assert a.get("zero/a") == b"\x00\xffbinary"
    assert a.num_keys() >= 3
    # WAIT answered by another client's SET.
    waiter = threading.Thread(target=b.wait, args=(["zero/late"],))
    waiter.start()
    time.sleep(0.5)
    a.set("zero/late", b"x")
    waiter.join()
    assert b.get("zero/late") == b"x"
    # compare_set: missing key with an empty and a non-empty expectation, match, mismatch.
    assert a.compare_set("zero/cas", "", "first") == b"first"
    assert a.compare_set("zero/cas2", "nothing", "x") == b"nothing"
    assert a.compare_set("zero/cas", "first", "second") == b"second"
    assert a.compare_set("zero/cas", "wrong", "third") == b"second"
    a.append("zero/log", b"ab")
    a.append("zero/log", b"cd")
    assert a.get("zero/log") == b"abcd"
    a.multi_set(["zero/m1", "zero/m2"], [b"one", b"two"])
    assert a.multi_get(["zero/m2", "zero/m1"]) == [b"two", b"one"]
    assert a.delete_key("zero/m1") and not a.delete_key("zero/m1")
    assert not a.check(["zero/m1"])
    assert a.queue_len("zero/q") == 0
    a.queue_push("zero/q", b"first")
    a.queue_push("zero/q", b"second")
    assert a.queue_len("zero/q") == 2
    assert a.queue_pop("zero/q") == b"first"
    assert b.queue_pop("zero/q") == b"second"
    popper = threading.Thread(target=b.queue_pop, args=("zero/q",))
    popper.start()
    time.sleep(0.5)
    a.queue_push("zero/q", b"third")
    popper.join()
    assert a.queue_len("zero/q") == 0
    try:
        a.queue_pop("zero/q", block=False)
        raise SystemExit("queue_pop on an empty queue returned")
    except dist.QueueEmptyError:
        pass
    # list_keys (LIST_KEYS) is left out: its order is the server's hash map's.
    del a, b
    lines = proxy.finish()
    write_transcript(os.path.join(out_dir, "tcpstore_v2_api.txt"),
                     "torch's TCPStore client through every call of the API, and a stray client",
                     versions, lines)
    return lines


# The launchers' variables a worker gets (not paths, which differ per run and machine).
LAUNCH_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                    "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR",
                    "MASTER_PORT", "TORCHELASTIC_", "ACCELERATE_")

DUMP = """#!{python}
import json, os, sys
variables = {{k: v for k, v in os.environ.items() if k.startswith({prefixes!r})
             and (k.startswith(("TORCHELASTIC_", "ACCELERATE_")) or k in {prefixes!r})
             and v and not any(c.isspace() or c == "/" for c in v)}}
with open(os.path.join({out!r}, "%d.json" % os.getpid()), "w") as f:
    json.dump({{"argv": sys.argv[1:], "variables": variables}}, f)
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def record_launchers(out_dir, versions, work):
    python = sys.executable
    dump = os.path.join(work, "dump_launch.py")
    lines = []
    launches = [
        ("torchrun", [python, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
                      "--nproc-per-node=2", "--no-python", dump, "train"]),
        ("launch_use_env", [python, "-m", "torch.distributed.launch", "--nproc-per-node=2",
                            "--master-addr=127.0.0.1", f"--master-port={free_port()}",
                            "--use-env", "--no-python", dump, "train"]),
        ("launch_script", [python, "-m", "torch.distributed.launch", "--nproc-per-node=2",
                           "--master-addr=127.0.0.1", f"--master-port={free_port()}", dump,
                           "train"]),
        ("accelerate", [python, "-m", "accelerate.commands.launch", "--no_python", "--multi_gpu",
                        "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
                        "--dynamo_backend", "no", "--main_process_port", str(free_port()), dump,
                        "train"]),
    ]
    for name, command in launches:
        out = os.path.join(work, name)
        os.makedirs(out)
        with open(dump, "w") as f:
            f.write(DUMP.format(python=python, prefixes=LAUNCH_VARIABLES, out=out))
        os.chmod(dump, 0o755)
        done = subprocess.run(command, env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=300,
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{name} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        records = []
        for file in os.listdir(out):
            with open(os.path.join(out, file)) as f:
                records.append(json.load(f))
        if len(records) != 2:
            raise SystemExit(f"{name}: {len(records)} processes, not 2")
        for record in sorted(records, key=lambda r: r["variables"].get("RANK", "")):
            variables = " ".join(f"{k}={v}" for k, v in sorted(record["variables"].items()))
            lines.append("\t".join([name, " ".join(record["argv"]), variables]))
    write_transcript(os.path.join(out_dir, "launch_environments.txt"),
                     "each process's launch line, argv after the program, launcher variables",
                     versions, lines)


def record_defaults(out_dir, versions):
    out = os.path.join(out_dir, "transformers5_training_arguments.json")
    subprocess.run([sys.executable, os.path.join(HERE, "training_arguments_defaults.py"), out],
                   check=True)
    with open(out) as f:
        reference = json.load(f)
    reference["recorded_with"] = version_line(versions)
    with open(out, "w") as f:
        json.dump(reference, f, indent=1, sort_keys=True)
        f.write("\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", nargs="?", default=os.path.join(HERE, "data"))
    parser.add_argument("--any-version", action="store_true",
                        help="record with versions other than RECORDED_WITH")
    parser.add_argument("--only", choices=["defaults", "torchrun", "api", "launch"])
    args = parser.parse_args()
    versions = installed_versions()
    if versions != RECORDED_WITH and not args.any_version:
        raise SystemExit(f"installed {version_line(versions)}; this script states "
                         f"{version_line(RECORDED_WITH)} (update RECORDED_WITH, or --any-version)")
    os.makedirs(args.out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        if args.only in (None, "defaults"):
            record_defaults(args.out_dir, versions)
        if args.only in (None, "api"):
            record_api(args.out_dir, versions)
        if args.only in (None, "torchrun"):
            record_torchrun(args.out_dir, versions, work)
        if args.only in (None, "launch"):
            record_launchers(args.out_dir, versions, work)
    print(f"wrote {args.out_dir}")


if __name__ == "__main__":
    main()
