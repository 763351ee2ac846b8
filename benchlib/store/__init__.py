"""The object store the input-pipeline rows read from: an S3-compatible server on
loopback that the workbook starts and stops (server), the link between it and the
readers, shaped and counted (link, and the proxy process it starts), and what is asked of
any S3 endpoint (s3: uploads, listings, signed URLs, and the checks that turn a wrong
endpoint, key, bucket or prefix into one line)."""
