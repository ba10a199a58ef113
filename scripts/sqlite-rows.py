#!/usr/bin/env python3
"""The rows the server's store writes per heartbeat, replayed against SQLite alone.

`fairsched bench server` at 3,000 agents / 10,000 operations writes, per heartbeat, about two
job starts and two job ends: a job row inserted and updated, and an event row each (with the
event log's four indexes). This replays that (batches of 300 heartbeats, 3,000 nodes, 10,000
operations, after 150 batches of warm-up) with the schema of crates/store (version 4) and
prints the CPU per heartbeat of each variant: pragmas (`cache`, `c16k`: the writing
connection's settings since d3984b1), and which event indexes exist (`noop`: without
events_by_operation, `nonode`, `nojob`, `noidx`, `noevents`). Python's own sqlite3 (the
system's SQLite, not the one bundled with rusqlite), so compare variants with each other only.

Usage: scripts/sqlite-rows.py [VARIANT...]   (default: all; data in a temporary directory)
"""
import sqlite3, time, random, os, shutil, sys, tempfile
SCHEMA_JOBS = """CREATE TABLE jobs (id TEXT PRIMARY KEY, operation TEXT NOT NULL, record TEXT NOT NULL, stdout_tail TEXT, stderr_tail TEXT) {wr};
CREATE INDEX jobs_by_operation ON jobs (operation);"""
SCHEMA_EVENTS = """CREATE TABLE events (seq INTEGER PRIMARY KEY {autoinc}, unix_ms INTEGER NOT NULL, record TEXT NOT NULL,
 kind TEXT NOT NULL DEFAULT '', operation TEXT, node TEXT, job TEXT);
{idx}"""
def run(name, idx=('operation','node','job'), page=None, cache=None, ckpt=None, timeidx=True, autoinc=True, jobs_wr=False, events=True, batch_hb=300, batches=60, sync='FULL', prefill_batches=150):
    d=tempfile.mkdtemp(prefix='sqlite-rows-')
    c=sqlite3.connect(d+'/x.db', isolation_level=None)
    if page: c.execute(f'pragma page_size={page}')
    c.execute('pragma journal_mode=WAL'); c.execute('pragma synchronous='+sync)
    if cache: c.execute(f'pragma cache_size={cache}')
    if ckpt: c.execute(f'pragma wal_autocheckpoint={ckpt}')
    c.executescript(SCHEMA_JOBS.format(wr='WITHOUT ROWID' if jobs_wr else ''))
    c.executescript(SCHEMA_EVENTS.format(autoinc='AUTOINCREMENT' if autoinc else '', idx=''.join('CREATE INDEX events_by_%s ON events (%s, seq);'%(i,i) for i in idx)+('CREATE INDEX events_by_time ON events (unix_ms);' if timeidx else '')))
    rnd=random.Random(1); seq=[0]; nj=[0]; running=[]
    def batch():
        jobs=[]; upd=[]; evs=[]
        t=int(time.time()*1000)
        for h in range(batch_hb):
            node='bench-node-%d'%rnd.randrange(3000)
            for k in range(2):
                if running:
                    jid,op=running.pop(0)
                    upd.append((jid,op,'{"id":"%s","task":0,"node":"%s","state":"completed","exit_code":0,"started_at":%d,"finished_at":%d}'%(jid,node,t,t)))
                    seq[0]+=1; evs.append((seq[0],t,'{"event":"allocation_finished","job":"%s","node":"%s","operation":"%s","outcome":"completed","t_ms":10431}'%(jid,node,op),'allocation_finished',op,node,jid))
                nj[0]+=1; jid='0.%d'%nj[0]; op='bench-op-%d'%rnd.randrange(10000)
                jobs.append((jid,op,'{"id":"%s","task":0,"node":"%s","state":"running","started_at":%d}'%(jid,node,t)))
                seq[0]+=1; evs.append((seq[0],t,'{"event":"allocation_started","job":"%s","node":"%s","operation":"%s","stage":"regular","t_ms":10431}'%(jid,node,op),'allocation_started',op,node,jid))
                running.append((jid,op))
        c.execute('BEGIN')
        q="INSERT INTO jobs (id, operation, record, stdout_tail, stderr_tail) VALUES (?1, ?2, ?3, NULL, NULL) ON CONFLICT (id) DO UPDATE SET record = excluded.record, stdout_tail = COALESCE(excluded.stdout_tail, jobs.stdout_tail), stderr_tail = COALESCE(excluded.stderr_tail, jobs.stderr_tail)"
        c.executemany(q, jobs+upd)
        if events:
            c.executemany("INSERT INTO events (seq, unix_ms, record, kind, operation, node, job) VALUES (?,?,?,?,?,?,?)", evs)
        c.execute('COMMIT')
    for i in range(prefill_batches): batch()
    t0=time.process_time(); w0=time.time()
    for i in range(batches): batch()
    cpu=time.process_time()-t0; wall=time.time()-w0
    hb=batches*batch_hb
    print('%-10s cpu/hb %6.1f us  wall/hb %6.1f us'%(name, cpu/hb*1e6, wall/hb*1e6), flush=True)
    c.close(); shutil.rmtree(d, ignore_errors=True)
args=sys.argv[1:]
variants={
 # The store before d3984b1 (SQLite's defaults), then its writing connection since.
 'base': {}, 'cache': dict(cache=-65536), 'c16k': dict(cache=-65536, ckpt=16384),
 # Pages of 2 KiB / 8 KiB (a new store only).
 'p2k': dict(page=2048, cache=-65536, ckpt=32768), 'p8k': dict(page=8192, cache=-65536, ckpt=8192),
 # Without one of the event log's indexes, without any, without the event rows.
 'noop': dict(idx=('node', 'job')), 'nonode': dict(idx=('operation', 'job')),
 'nojob': dict(idx=('operation', 'node')), 'notime': dict(timeidx=False),
 'noidx': dict(idx=(), timeidx=False), 'noevents': dict(events=False),
 # Events without AUTOINCREMENT; jobs WITHOUT ROWID.
 'noautoinc': dict(autoinc=False), 'jobs_wr': dict(jobs_wr=True),
}
for v in (args or variants):
    run(v, **variants[v])
