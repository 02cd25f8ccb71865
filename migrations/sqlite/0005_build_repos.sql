-- What a build tested, as Prow's pod-utils record it: started.json's `repos` ({"org/repo":
-- "branch:sha[,pr:sha]"}), merged with finished.json's metadata.repos, as a JSON object. Builds of
-- existing Prow jobs carry no harness metadata; their provider version is the commit of the
-- provider's repository here. NULL when the build names no repos.
-- Keep in step with ../postgres/0005_build_repos.sql.
ALTER TABLE builds ADD COLUMN repos TEXT;
