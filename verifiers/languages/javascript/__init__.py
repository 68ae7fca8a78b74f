"""JavaScript's and TypeScript's proving floor: the runners' graded runs, the policy, the guard's
sentinels, the reader of suspicious patches (``grading.py`` is the interface)."""
