"""An index served by a Milvus collection (`MilvusIndex`, docs/scaling.md, "3. One index past one machine"): needs the
`pymilvus` client (`pip install kbgate[milvus]`). Only `indexes.store.IndexStore` imports this
package, for an index configured `[indexes.NAME] backend = "milvus"`."""

from .index import MilvusIndex

__all__ = ["MilvusIndex"]
