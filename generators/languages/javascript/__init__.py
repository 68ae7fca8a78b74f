"""JavaScript/TypeScript: everything that builds a task for a package.json project (language.py
is its ``Language``; detection, Node, recipe, runners, test files, bug operators, issue context)."""
