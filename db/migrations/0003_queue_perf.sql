-- 0003_queue_perf: a claim whose cost does not grow with the backlog, and
-- autovacuum that keeps up with the queue's churn (docs/BENCHMARKS.md section 3).

-- The claim's pick: the best queued job this worker may run, locked with SKIP
-- LOCKED (DESIGN.md: FOR UPDATE SKIP LOCKED with a LIMIT; the claim statement in
-- db_queue.c calls it from its CTE and updates the row it returns).
--
-- Why a function: the only plan that stays cheap is the ordered scan of the
-- partial index jobs_claim_idx, which stops at the first live entry and marks
-- the dead entries of claimed jobs as it passes (so later scans skip them).  The
-- planner picks a bitmap scan + sort instead whenever its statistics say few
-- jobs are queued (e.g. analyzed while the queue was empty, then a burst of
-- submits): a bitmap scan visits every entry of the index, dead ones included,
-- and never marks them, so each claim costs O(jobs claimed since the last
-- vacuum) -- 271 claims/s instead of 1,300 on a 20,000-job drain.  The SET
-- clauses hold only while the function runs and leave the ordered index scan as
-- the one plan without a penalty, whatever the statistics say.  PL/pgSQL keeps
-- the prepared plan for the session.
CREATE FUNCTION fb_claim_pick(p_engines text[], p_device text) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET enable_bitmapscan = off
SET enable_seqscan = off
SET enable_sort = off
AS $$
DECLARE
    picked bigint;
BEGIN
    SELECT id INTO picked FROM jobs
     WHERE state = 'queued' AND engine = ANY (p_engines) AND device = p_device
       AND not_before <= now()
     ORDER BY priority DESC, id
     LIMIT 1
       FOR UPDATE SKIP LOCKED;
    RETURN picked;
END
$$;

-- Every job is updated at least twice (claim, complete) and no update can be
-- HOT (state is indexed), so the table and its indexes gather dead versions at
-- the rate of the queue.  Vacuum and analyze jobs after ~2% of it changed (the
-- defaults wait for 20% and 10%), and do not throttle that vacuum.
ALTER TABLE jobs SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.02,
    autovacuum_vacuum_insert_threshold = 1000,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_analyze_threshold = 1000,
    autovacuum_vacuum_cost_delay = 0
);
