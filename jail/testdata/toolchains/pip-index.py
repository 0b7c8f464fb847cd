import urllib.parse


class PackageIndex:
    """Represents a Package Index and provides easier access to endpoints"""

    def __init__(self, url: str, file_storage_domain: str) -> None:
        self.url = url
        self.file_storage_domain = file_storage_domain


PyPI = PackageIndex("https://index.example.test/", file_storage_domain="files.example.test")
TestPyPI = PackageIndex(
    "https://test-index.example.test/", file_storage_domain="test-files.example.test"
)
