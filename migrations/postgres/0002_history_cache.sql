-- GitHub's answers for the LKG commit histories, by request URL, with their ETags: a reload makes
-- conditional requests (a 304 costs no rate limit), and a cached history is still served while
-- GitHub fails. Keep in step with ../sqlite/0002_history_cache.sql.
CREATE TABLE history_cache (
    key        TEXT PRIMARY KEY,
    etag       TEXT,
    -- The URL of the next page (from the Link header), if any.
    next_url   TEXT,
    body       TEXT NOT NULL,
    -- When it was fetched or last confirmed (unix seconds).
    fetched_at BIGINT NOT NULL
);
