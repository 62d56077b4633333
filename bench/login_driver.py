"""Signs in RATE times per second for SECONDS (four threads, each with its
own connection per attempt, paced), and prints the successful sign-ins per
second. Used by bench/logins.sh."""
import http.client
import sys
import threading
import time
import urllib.parse

host, port, user, password, rate, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5]), float(sys.argv[6])
THREADS = 4
body = urllib.parse.urlencode({"username": user, "password": password, "next": "/"})
headers = {"Content-Type": "application/x-www-form-urlencoded", "Origin": f"http://{host}:{port}", "Accept": "application/json"}
ok = [0] * THREADS
start = time.monotonic()


def worker(i):
    interval = THREADS / rate
    due = start + i * interval / THREADS
    while due < start + seconds:
        time.sleep(max(0.0, due - time.monotonic()))
        c = http.client.HTTPConnection(host, port, timeout=10)
        c.request("POST", "/fn/login", body, headers)
        r = c.getresponse()
        r.read()
        c.close()
        if r.status < 400:
            ok[i] += 1
        due += interval


threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(f"{sum(ok) / (time.monotonic() - start):.1f}")
