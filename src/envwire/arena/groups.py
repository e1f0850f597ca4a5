"""Groups: pages that list arena envs and other groups, as the AISysProj server has them.

A group has a name (in its URL, ``/group/<name>``), a title and an HTML description written by
the admin; its entries are envs and subgroups. The group ``main`` always exists: it is the
front page. Groups are stored in the arena database (tables ``groups`` and ``group_entries``).
"""

from __future__ import annotations

from dataclasses import dataclass

from envwire.arena.accounts import check_imported_name
from envwire.arena.errors import ConflictError, NotFoundError
from envwire.arena.store import Store

__all__ = ["MAIN", "Group", "Groups"]

#: The group shown as the front page.
MAIN = "main"
_MAIN_TITLE = "Arena"


@dataclass(frozen=True, slots=True)
class Group:
    """A group and its entries (env names and group names, sorted)."""

    name: str
    title: str
    description_html: str
    envs: tuple[str, ...]
    subgroups: tuple[str, ...]


class Groups:
    """The groups of one arena database."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def get(self, name: str) -> Group:
        """A group with its entries.

        Raises:
            NotFoundError: no such group.
        """
        row = self.store.query_one(
            "SELECT title, description_html FROM groups WHERE name = ?", (name,)
        )
        if row is None:
            if name != MAIN:
                raise NotFoundError(f"no group {name!r}")
            row = (_MAIN_TITLE, "")
        entries = self.store.query(
            "SELECT kind, entry FROM group_entries WHERE grp = ? ORDER BY entry", (name,)
        )
        return Group(
            name,
            str(row[0]),
            str(row[1]),
            tuple(str(e) for k, e in entries if k == "env"),
            tuple(str(e) for k, e in entries if k == "group"),
        )

    def exists(self, name: str) -> bool:
        """Whether the group exists (``main`` always does)."""
        return name == MAIN or bool(
            self.store.query_one("SELECT 1 FROM groups WHERE name = ?", (name,))
        )

    def all(self) -> list[Group]:
        """Every group, ``main`` included."""
        names = {str(r[0]) for r in self.store.query("SELECT name FROM groups")} | {MAIN}
        return [self.get(n) for n in sorted(names)]

    def make(self, name: str, title: str, description_html: str, *, replace: bool = False) -> None:
        """Create a group (or, with ``replace``, give it a new title and description).

        Raises:
            InvalidArgumentError: a bad name.
            ConflictError: it exists and ``replace`` is false.
        """
        check_imported_name(name, "group")
        if self.exists(name) and not replace:
            raise ConflictError(f"group {name!r} exists")
        with self.store.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO groups VALUES (?, ?, ?)", (name, title, description_html)
            )

    def delete(self, name: str) -> None:
        """Delete a group and every entry naming it (``main`` is only emptied).

        Raises:
            NotFoundError: no such group.
        """
        if not self.exists(name):
            raise NotFoundError(f"no group {name!r}")
        with self.store.transaction() as db:
            if name != MAIN:
                db.execute("DELETE FROM groups WHERE name = ?", (name,))
            db.execute("DELETE FROM group_entries WHERE grp = ?", (name,))
            db.execute("DELETE FROM group_entries WHERE kind = 'group' AND entry = ?", (name,))

    def add(self, name: str, kind: str, entry: str) -> None:
        """Add an env (``kind`` ``"env"``) or a subgroup (``"group"``) to a group.

        Raises:
            NotFoundError: the group or the entry does not exist.
        """
        if not self.exists(name):
            raise NotFoundError(f"no group {name!r}")
        missing = self.store.env(entry) is None if kind == "env" else not self.exists(entry)
        if missing:
            raise NotFoundError(f"no {'arena env' if kind == 'env' else 'group'} {entry!r}")
        with self.store.transaction() as db:
            db.execute("INSERT OR IGNORE INTO group_entries VALUES (?, ?, ?)", (name, kind, entry))

    def of_env(self, env: str) -> list[Group]:
        """The groups listing an env."""
        rows = self.store.query(
            "SELECT grp FROM group_entries WHERE kind = 'env' AND entry = ? ORDER BY grp", (env,)
        )
        return [self.get(str(r[0])) for r in rows]
