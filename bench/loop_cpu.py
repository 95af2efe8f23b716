"""CPU time (schedstat) the event loop thread (cairn-io-0) of a `--threads 1` server spends on one
action: a DEL of a 100 MB value, or a TAG.DEL of 100k records, each followed by 2000 small SETs
(which also let the allocator collect), minus the same SETs alone. Unlike a latency run it is
barely blurred by other load on the machine (issue 19, part 4).

    .venv/bin/python bench/loop_cpu.py target/release/cairn-server bigdel|tagdel
"""
import os, subprocess, sys, time, random
import redis
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if len(sys.argv) != 3 or sys.argv[2] not in ("bigdel", "tagdel"):
    sys.exit(f"usage: {sys.argv[0]} SERVER_BINARY bigdel|tagdel")
binary, what = sys.argv[1], sys.argv[2]
port = random.randint(20000, 40000)
p = subprocess.Popen([binary, "--port", str(port), "--threads", "1", "--max-value-size", "256mb"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(0.5)
r = redis.Redis(port=port)
io = [t for t in os.listdir(f"/proc/{p.pid}/task") if open(f"/proc/{p.pid}/task/{t}/comm").read().strip() == "cairn-io-0"][0]
def cpu():
    return int(open(f"/proc/{p.pid}/task/{io}/schedstat").read().split()[0])
def sets():
    pp = r.pipeline(transaction=False)
    for i in range(2000):
        pp.set(f"s{i}", "v" * 100)
    pp.execute()
def measure(action):
    time.sleep(0.3)
    c0 = cpu(); action(); time.sleep(0.2); sets(); time.sleep(0.2); return cpu() - c0
out = []
for rep in range(3):
    if what == "bigdel":
        r.set("big", b"x" * (100 << 20))
        a = measure(lambda: r.delete("big"))
    else:
        from suites.latency import tag_load
        tag_load(port, 100000)
        a = measure(lambda: r.execute_command("TAG.DEL", "WHERE", 9, "=", 1))
    b = measure(lambda: r.ping())
    out.append((a - b) / 1e6)
p.terminate(); p.wait()
print(what, os.path.basename(binary), "loop CPU ms for the action:", [round(x, 2) for x in out])
