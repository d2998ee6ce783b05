"""S3-compatible object-store tier backend (boto3; ``pip install 'rmqd[s3]'``).

Objects cannot be appended to, so a segment is a set of chunk objects, one per commit:
``<prefix>/<segment path>/chunk/<20-digit position>`` (the layout of RocketMQ's own S3 tier
module). A read finds the chunks covering its range and issues one ranged GET per chunk touched:
an uploaded index file is one chunk, so a key query costs two ranged GETs. Each PUT is atomic, so a
crash leaves whole chunks; recovery deletes the chunks past the committed size.

broker.conf: ``objectStoreEndpoint`` (e.g. ``http://127.0.0.1:9000``), ``objectStoreBucket``,
``objectStoreAccessKey``, ``objectStoreSecretKey`` (Java's names) and ``objectStoreRegion``
(rmqd's, default us-east-1); ``tieredStoreFilePath`` is a key prefix inside the bucket.
"""
from __future__ import annotations

import bisect
import logging
import os
import threading
from typing import BinaryIO, Callable, Optional

from rmqd.store.tier.backend import TierBackend

log = logging.getLogger(__name__)

CHUNK = "/chunk/"


class S3Backend(TierBackend):
    name = "s3"

    def __init__(self, endpoint: str, bucket: str, access_key: str = "", secret_key: str = "",
                 region: Optional[str] = None, prefix: Optional[str] = None, create_bucket: bool = True) -> None:
        super().__init__()
        try:
            import boto3
            from botocore.config import Config
        except ImportError as exc:       # pragma: no cover - depends on the install
            raise RuntimeError("the s3 tier backend needs boto3: pip install 'rmqd[s3]'") from exc
        if not bucket:
            raise ValueError("the s3 tier backend needs objectStoreBucket")
        self.bucket = bucket
        self.endpoint = endpoint or None
        self.prefix = (prefix.strip("/") + "/") if prefix else ""
        self.client = boto3.client(
            "s3", endpoint_url=self.endpoint, region_name=region or "us-east-1",
            aws_access_key_id=access_key or None, aws_secret_access_key=secret_key or None,
            config=Config(retries={"max_attempts": 5, "mode": "standard"}, max_pool_connections=16,
                          s3={"addressing_style": "path"}))
        self._chunks: dict[str, list[tuple[int, int]]] = {}     # path -> sorted (position, length)
        self._lock = threading.Lock()
        if create_bucket:
            self._ensure_bucket()

    def describe(self) -> str:
        return f"s3:{self.endpoint or 'aws'}/{self.bucket}/{self.prefix}"

    def _ensure_bucket(self) -> None:
        from botocore.exceptions import ClientError
        try:
            self.client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code"))
            if code not in ("404", "NoSuchBucket", "NotFound"):
                raise
            log.info("tier: creating bucket %s", self.bucket)
            self.client.create_bucket(Bucket=self.bucket)

    def _key(self, path: str, position: int) -> str:
        return f"{self.prefix}{path}{CHUNK}{position:020d}"

    def _list_keys(self, prefix: str) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = []
        token = None
        while True:
            kw = {"Bucket": self.bucket, "Prefix": prefix}
            if token:
                kw["ContinuationToken"] = token
            resp = self.client.list_objects_v2(**kw)
            out.extend((o["Key"], o["Size"]) for o in resp.get("Contents", ()))
            if not resp.get("IsTruncated"):
                return out
            token = resp.get("NextContinuationToken")

    def _chunk_list(self, path: str) -> list[tuple[int, int]]:
        chunks = self._chunks.get(path)
        if chunks is None:
            found = []
            for key, size in self._list_keys(f"{self.prefix}{path}{CHUNK}"):
                tail = key.rsplit("/", 1)[-1]
                if tail.isdigit():
                    found.append((int(tail), size))
            found.sort()
            with self._lock:
                chunks = self._chunks.setdefault(path, found)
        return chunks

    def write(self, path: str, position: int, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self._key(path, position), Body=bytes(data))
        with self._lock:
            chunks = self._chunks.get(path)
            if chunks is not None:
                i = bisect.bisect_left(chunks, (position, -1))
                if i < len(chunks) and chunks[i][0] == position:
                    chunks[i] = (position, len(data))
                else:
                    chunks.insert(i, (position, len(data)))
        self._count_write(len(data))

    def upload(self, path: str, local_file: str, progress: Optional[Callable[[], None]] = None) -> None:
        """One object, so an uploaded index file is a single chunk: one PUT, or a multipart
        upload of :attr:`upload_part_size` parts when larger (``progress`` after each part but
        the last). A failed multipart upload is aborted; one a crash interrupted is aborted by
        :meth:`abort_partial_uploads` at the next start."""
        key = self._key(path, 0)
        size = os.path.getsize(local_file)
        part = self.upload_part_size
        with open(local_file, "rb") as f:
            if size <= part:
                self.client.put_object(Bucket=self.bucket, Key=key, Body=f.read())
            else:
                self._multipart(key, f, size, part, progress)
        with self._lock:
            self._chunks[path] = [(0, size)]
        self._count_write(size)

    def _multipart(self, key: str, f: BinaryIO, size: int, part: int, progress: Optional[Callable[[], None]]) -> None:
        upload_id = self.client.create_multipart_upload(Bucket=self.bucket, Key=key)["UploadId"]
        try:
            parts: list[dict[str, object]] = []
            pos = 0
            while pos < size:
                data = f.read(part)
                if not data:
                    raise OSError(f"tier upload of {key}: the local file ended at {pos} of {size} bytes")
                resp = self.client.upload_part(Bucket=self.bucket, Key=key, UploadId=upload_id,
                                               PartNumber=len(parts) + 1, Body=data)
                parts.append({"ETag": resp["ETag"], "PartNumber": len(parts) + 1})
                pos += len(data)
                if progress is not None and pos < size:
                    progress()
            self.client.complete_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id,
                                                  MultipartUpload={"Parts": parts})
        except BaseException:
            try:
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
            except Exception:
                log.exception("tier: aborting the multipart upload %s of %s failed (aborted at the next start)",
                              upload_id, key)
            raise

    def abort_partial_uploads(self, prefix: str) -> int:
        n = 0
        kw = {"Bucket": self.bucket, "Prefix": f"{self.prefix}{prefix}"}
        while True:
            resp = self.client.list_multipart_uploads(**kw)
            for u in resp.get("Uploads", ()):
                log.warning("tier: aborting the interrupted multipart upload of %s (started %s)", u["Key"],
                            u.get("Initiated"))
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=u["Key"], UploadId=u["UploadId"])
                n += 1
            if not resp.get("IsTruncated"):
                return n
            kw["KeyMarker"] = resp.get("NextKeyMarker", "")
            kw["UploadIdMarker"] = resp.get("NextUploadIdMarker", "")

    def read(self, path: str, position: int, length: int) -> bytes:
        chunks = list(self._chunk_list(path))
        i = bisect.bisect_right(chunks, (position, 1 << 62)) - 1
        parts = []
        end = position + length
        pos = position
        i = max(i, 0)
        while pos < end and i < len(chunks):
            cpos, clen = chunks[i]
            if cpos + clen <= pos:
                i += 1
                continue
            if cpos > pos:
                break                          # a hole: return what is contiguous
            lo, hi = pos - cpos, min(clen, end - cpos)
            resp = self.client.get_object(Bucket=self.bucket, Key=self._key(path, cpos),
                                          Range=f"bytes={lo}-{hi - 1}")
            data = resp["Body"].read()
            self._count_read(len(data))
            parts.append(data)
            pos = cpos + lo + len(data)
            if len(data) < hi - lo:
                break
            i += 1
        return b"".join(parts)

    def size(self, path: str) -> int:
        chunks = self._chunk_list(path)
        end = 0
        for pos, ln in chunks:
            if pos > end:
                break
            end = max(end, pos + ln)
        return end

    def truncate(self, path: str, size: int) -> None:
        for pos, ln in list(self._chunk_list(path)):
            if pos >= size:
                log.warning("tier: deleting chunk %s@%d (written after the last metadata commit)", path, pos)
                self.client.delete_object(Bucket=self.bucket, Key=self._key(path, pos))
                with self._lock:
                    self._chunks[path] = [c for c in self._chunks.get(path, []) if c[0] != pos]
            elif pos + ln > size:
                raise RuntimeError(f"tier: chunk {path}@{pos} (+{ln}) straddles the committed size {size}")

    def delete(self, path: str) -> None:
        keys = [k for k, _ in self._list_keys(f"{self.prefix}{path}{CHUNK}")]
        for i in range(0, len(keys), 1000):
            self.client.delete_objects(Bucket=self.bucket,
                                       Delete={"Objects": [{"Key": k} for k in keys[i:i + 1000]],
                                               "Quiet": True})
        with self._lock:
            self._chunks.pop(path, None)

    def list(self, prefix: str = "") -> dict[str, int]:
        out: dict[str, int] = {}
        for key, size in self._list_keys(f"{self.prefix}{prefix}"):
            rel = key[len(self.prefix):]
            path, sep, _ = rel.rpartition(CHUNK)
            if sep:
                out[path] = out.get(path, 0) + size
        return out
