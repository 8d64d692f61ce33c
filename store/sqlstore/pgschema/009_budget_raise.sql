-- SQLite's version 17 (budget raise): the tokens operators added to the
-- item's token budget (desired.Spec.BudgetRaise).
ALTER TABLE work_items ADD COLUMN budget_raise BIGINT NOT NULL DEFAULT 0 CHECK (budget_raise >= 0);
