"""Reading and searching logs of any size in linear time: pages, the search, its readers and helpers."""
