#!/usr/bin/env python3
"""The XML-API writes of Google Cloud Storage for the backup tests' GCS emulator.

object_store's GCS client speaks GCS's XML API: a path-style PUT of an object, multipart uploads
(POST ?uploads, PUT ?partNumber&uploadId, POST ?uploadId to complete, DELETE ?uploadId to
abort), HEAD and ranged GET. fake-gcs-server, the emulator the tests run, serves the reads but
not those writes. This front, on LISTEN_PORT, takes the writes and makes each a JSON-API media
upload to the emulator on EMULATOR_PORT: a PUT at once; a multipart upload's parts are kept
here until the complete request, which uploads the parts it names joined in its order, so the
object appears whole when the upload completes, as in GCS, and not before. Everything else goes
to the emulator as it came.

usage: gcs_xml_front.py LISTEN_PORT EMULATOR_PORT
"""

import hashlib
import http.client
import http.server
import json
import re
import sys
import threading
import urllib.parse
import uuid
from xml.sax.saxutils import escape

EMULATOR = ("127.0.0.1", int(sys.argv[2]))
# Upload id -> (bucket, object, {part number: bytes}).
UPLOADS = {}
LOCK = threading.Lock()
# The request headers a read passes on.
READ_HEADERS = ("range", "if-match", "if-none-match", "if-modified-since", "if-unmodified-since")
# The response headers a read does not pass back (this front sets its own framing).
HOP_HEADERS = ("connection", "transfer-encoding", "content-length", "keep-alive", "date", "server")


def emulator(method, path, body=None, headers=None):
    conn = http.client.HTTPConnection(*EMULATOR, timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp, resp.read()
    finally:
        conn.close()


def media_upload(bucket, name, data):
    """Uploads `data` as `bucket/name`: the emulator's status and object resource."""
    path = "/upload/storage/v1/b/%s/o?uploadType=media&name=%s" % (
        urllib.parse.quote(bucket, safe=""),
        urllib.parse.quote(name, safe=""),
    )
    resp, out = emulator("POST", path, data, {"Content-Type": "application/octet-stream"})
    return resp.status, (json.loads(out) if resp.status == 200 else None)


def etag_of(data):
    return '"%s"' % hashlib.md5(data).hexdigest()


class Front(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def target(self):
        url = urllib.parse.urlsplit(self.path)
        bucket, _, name = url.path.lstrip("/").partition("/")
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        return urllib.parse.unquote(bucket), urllib.parse.unquote(name), query

    def reply(self, status, headers=(), body=b""):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def reply_xml(self, root, fields, headers=()):
        inner = "".join("<%s>%s</%s>" % (k, escape(v), k) for k, v in fields)
        xml = '<?xml version="1.0" encoding="UTF-8"?><%s>%s</%s>' % (root, inner, root)
        self.reply(200, [("Content-Type", "application/xml"), *headers], xml.encode())

    def uploaded(self, bucket, name, data):
        """Uploads `data` as `bucket/name`: the headers a write answers with, or None once the
        emulator's refusal has been passed back."""
        status, obj = media_upload(bucket, name, data)
        if obj is None:
            self.reply(status)
            return None
        return [("ETag", etag_of(data)), ("x-goog-generation", str(obj["generation"]))]

    def do_PUT(self):
        bucket, name, query = self.target()
        data = self.body()
        if "uploadId" in query:
            with LOCK:
                upload = UPLOADS.get(query["uploadId"][0])
                if upload is not None:
                    upload[2][int(query["partNumber"][0])] = data
            if upload is None:
                return self.reply(404)
            return self.reply(200, [("ETag", etag_of(data))])
        headers = self.uploaded(bucket, name, data)
        if headers is not None:
            self.reply(200, headers)

    def do_POST(self):
        bucket, name, query = self.target()
        data = self.body()
        if "uploads" in query:
            upload_id = uuid.uuid4().hex
            with LOCK:
                UPLOADS[upload_id] = (bucket, name, {})
            fields = [("Bucket", bucket), ("Key", name), ("UploadId", upload_id)]
            return self.reply_xml("InitiateMultipartUploadResult", fields)
        if "uploadId" not in query:
            return self.reply(405)
        with LOCK:
            upload = UPLOADS.pop(query["uploadId"][0], None)
        if upload is None or upload[:2] != (bucket, name):
            return self.reply(404)
        joined = bytearray()
        for part in re.findall(r"<Part>(.*?)</Part>", data.decode(), re.S):
            number = int(re.search(r"<PartNumber>\s*(\d+)\s*</PartNumber>", part).group(1))
            etag = re.search(r"<ETag>(.*?)</ETag>", part, re.S).group(1).replace("&quot;", '"')
            piece = upload[2].get(number)
            if piece is None or etag_of(piece) != etag.strip():
                return self.reply(400)
            joined += piece
        joined = bytes(joined)
        headers = self.uploaded(bucket, name, joined)
        if headers is not None:
            fields = [("Bucket", bucket), ("Key", name), ("ETag", etag_of(joined))]
            self.reply_xml("CompleteMultipartUploadResult", fields, headers[1:])

    def do_DELETE(self):
        _, _, query = self.target()
        self.body()
        if "uploadId" in query:
            with LOCK:
                UPLOADS.pop(query["uploadId"][0], None)
            return self.reply(204)
        self.forward()

    def do_GET(self):
        self.forward()

    def do_HEAD(self):
        self.forward()

    def forward(self):
        headers = {k: v for k, v in self.headers.items() if k.lower() in READ_HEADERS}
        resp, data = emulator(self.command, self.path, None, headers)
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in HOP_HEADERS:
                self.send_header(k, v)
        if self.command == "HEAD":
            self.send_header("Content-Length", resp.getheader("Content-Length", "0"))
            self.end_headers()
        else:
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)


if __name__ == "__main__":
    server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Front)
    server.daemon_threads = True
    server.serve_forever()
