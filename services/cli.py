"""`auditmesh`: command-line client for the router.

    auditmesh moderate --tenant-key demo-acme-key --text "hello" [--image photo.jpg] [--json]
    auditmesh hash-key [KEY]      # digest for config/tenants.yaml (a new random key if none given)
    auditmesh labels import labels.jsonl --tenant acme          # into the router's label store (admin API)
    auditmesh labels delete item-17 item-18 --tenant acme       # erase those items' labels
    auditmesh reasons AUDIT_ID --tenant acme   # a decision's statement of reasons (DSA Article 17) as JSON
    auditmesh appeals submit AUDIT_ID --tenant acme --appellant user-81 --statement "..."   # a user's appeal
    auditmesh appeals resolve APPEAL_ID --tenant acme --outcome reversed --reviewer rev-7 --text "..."   # + a label
    auditmesh tenants purge initech      # erase a removed tenant's labels, appeals, review tasks, audit records
    auditmesh banks create spam_waves --shared --category spam   # known-content banks (services/match/)
    auditmesh banks add spam_waves --text "..." --image known.jpg
    auditmesh banks import spam_waves hashes.txt --format threatexchange   # or csv, hma_json; `banks export` too
    auditmesh classifier train --examples labels.jsonl --tenant acme   # -> var/classifiers/acme/<version>/
    auditmesh classifier train --from-router --tenant acme
    auditmesh classifier score --classifier var/classifiers/acme/<version> --text "free airdrop, connect your wallet"
    auditmesh classifier evaluate --classifier var/classifiers/acme/<version> --examples test.jsonl
    auditmesh classifier activate --classifier var/classifiers/acme/<version> --policy default --shadow|--canary PCT|--full
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import uuid
from pathlib import Path
from typing import Any, Sequence

import grpc
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc
from google.protobuf.json_format import MessageToDict

from auditmesh.client.settings import blocking_channel
from services.router.tenants import hash_key

#: services.match.formats.FORMATS (not imported: it loads the match service's hashing; a test keeps them equal).
BANK_FORMATS = ("csv", "threatexchange", "hma_json")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="auditmesh", description="auditmesh command-line client.")
    commands = parser.add_subparsers(dest="command", required=True)
    moderate = commands.add_parser("moderate", help="moderate one item (text and/or images) and print the decision")
    moderate.add_argument("--router", default="127.0.0.1:8100", help="router address host:port (default 127.0.0.1:8100)")
    moderate.add_argument("--tenant-key", required=True, help="the tenant's API key (sent as x-api-key)")
    moderate.add_argument("--text", action="append", default=[], help="a text part (repeatable)")
    moderate.add_argument("--image", action="append", default=[], type=Path, help="an image file part: JPEG, PNG or WebP (repeatable)")
    moderate.add_argument("--policy", default="", help="policy name (default: the tenant's default policy)")
    moderate.add_argument("--id", default="", help="item id (default: a random one)")
    moderate.add_argument("--timeout", type=float, default=10.0, help="deadline in seconds (default 10)")
    moderate.add_argument("--json", action="store_true", help="print the full response as JSON")
    add_tls_arguments(moderate)
    key = commands.add_parser("hash-key", help="print the SHA-256 digest of an API key for config/tenants.yaml")
    key.add_argument("key", nargs="?", help="the key (default: generate a new random key and print both)")
    classifier = commands.add_parser("classifier", help="train a tenant classifier from labelled examples, or try one")
    actions = classifier.add_subparsers(dest="action", required=True)
    train = actions.add_parser("train", help="train from a JSONL file of {\"text\": ..., \"labels\": {category: 0|1}}"
                               " and write the classifier directory (docs/tenant-classifiers.md)")
    source = train.add_mutually_exclusive_group(required=True)
    source.add_argument("--examples", type=Path, help="the labelled JSONL file")
    source.add_argument("--from-router", action="store_true", help="the tenant's labels in the router's label store "
                        "(`auditmesh labels import`, SubmitLabels), read through the PolicyAdmin API")
    add_admin_arguments(train)
    train.add_argument("--tenant", required=True, help="the tenant the classifier belongs to")
    target = train.add_mutually_exclusive_group()
    target.add_argument("--into", type=Path, default=Path("var/classifiers"),
                        help="the text service's tenant_classifiers folder: the classifier is written to "
                        "INTO/<tenant>/<version>/ (default var/classifiers)")
    target.add_argument("--out", type=Path, help="write the classifier to exactly this directory instead")
    train.add_argument("--holdout", type=float, default=0.2, help="fraction of texts held out for the reported "
                       "metrics (default 0.2)")
    train.add_argument("--seed", type=int, default=0, help="seed for folds and learning-curve samples (default 0)")
    train.add_argument("--threads", type=int, default=1, help="encoder threads (default 1)")
    train.add_argument("--nice", type=int, default=10, help="lower this process's CPU priority by this much first "
                       "(default 10: moderation on the same machine goes first)")
    score = actions.add_parser("score", help="score texts with a trained classifier directory")
    score.add_argument("--classifier", type=Path, required=True, help="the classifier directory")
    score.add_argument("--text", action="append", required=True, help="a text (repeatable)")
    evaluate = actions.add_parser("evaluate", help="precision, recall, F1 and accuracy per category on a labelled "
                                  "JSONL file the classifier was not trained on")
    evaluate.add_argument("--classifier", type=Path, required=True, help="the classifier directory")
    evaluate.add_argument("--examples", type=Path, required=True, help="the labelled JSONL file")
    activate = actions.add_parser("activate", help="load a classifier on the text service and put a new version of "
                                  "the tenant's policy that reads it: as a shadow canary, a canary, or active for "
                                  "that tenant")
    activate.add_argument("--classifier", type=Path, required=True,
                          help="the classifier directory (inside the text service's tenant_classifiers folder)")
    activate.add_argument("--policy", required=True, help="the tenant's policy the new version is derived from")
    stage = activate.add_mutually_exclusive_group(required=True)
    stage.add_argument("--shadow", action="store_true", help="score every item of the tenant, never act; "
                       "GetCanary counts the disagreements")
    stage.add_argument("--canary", type=float, metavar="PCT", help="act on PCT %% of the tenant's items, with "
                       "automatic rollback")
    stage.add_argument("--full", action="store_true", help="make it the tenant's active version")
    activate.add_argument("--max-disagreement", type=float, default=0.0, metavar="RATE",
                          help="with --shadow: stop the canary by itself once the candidate decides differently on "
                          "more than this share of the tenant's items (default: the router's canary bounds)")
    activate.add_argument("--mode", choices=["add", "replace"], default="add",
                          help="for built-in categories: the higher of the shipped model's and the classifier's "
                          "score (add, default), or the classifier's (replace)")
    activate.add_argument("--text", default="127.0.0.1:8101", help="the text service's KServe address, plaintext "
                          "(default 127.0.0.1:8101, make run's)")
    add_admin_arguments(activate)
    activate.add_argument("--internal-secret-file", type=Path, default=None,
                          help="the mesh's internal secret, for KServe calls (default: env AUDITMESH_INTERNAL_SECRET, "
                          "else the file AUDITMESH_INTERNAL_SECRET_FILE names, else make run's var/secrets/internal.secret)")
    activate.add_argument("--internal-admin-secret-file", type=Path, default=None,
                          help="the mesh's internal admin secret, for RepositoryModelLoad: it can load and unload any "
                          "model, so only the mesh's operators hold it (default: env AUDITMESH_INTERNAL_ADMIN_SECRET, else "
                          "the file AUDITMESH_INTERNAL_ADMIN_SECRET_FILE names, else make run's "
                          "var/secrets/internal-admin.secret)")
    labels = commands.add_parser("labels", help="reviewers' labels in the router's label store (PolicyAdmin API)")
    label_actions = labels.add_subparsers(dest="action", required=True)
    imports = label_actions.add_parser("import", help="store a JSONL file of {\"text\": ..., \"labels\": {category: 0|1}}"
                                       " (optional \"id\") as the tenant's labels; a later label of an id replaces it")
    imports.add_argument("file", type=Path, help="the labelled JSONL file")
    imports.add_argument("--tenant", required=True, help="the tenant the labels belong to")
    imports.add_argument("--reviewer", default="", help="who labelled them (stored with each label)")
    add_admin_arguments(imports)
    deletes = label_actions.add_parser("delete", help="delete the tenant's labels of some items (an erasure request, a "
                                       "label given by mistake)")
    deletes.add_argument("item_ids", nargs="+", metavar="ITEM_ID", help="the items' ids as the labels were stored")
    deletes.add_argument("--tenant", required=True, help="the tenant the labels belong to")
    add_admin_arguments(deletes)
    reasons = commands.add_parser("reasons", help="a decision's statement of reasons (EU DSA Article 17) as JSON, "
                                  "from its audit record (PolicyAdmin GetStatementOfReasons)")
    reasons.add_argument("audit_id", metavar="AUDIT_ID", help="the decision's audit record id (the moderation response's "
                         "audit_id, QueryAudit, or a review task's record)")
    reasons.add_argument("--tenant", required=True, help="the tenant the decision belongs to")
    add_admin_arguments(reasons)
    appeals = commands.add_parser("appeals", help="appeals of decisions (PolicyAdmin SubmitAppeal / ResolveAppeal)")
    appeal_actions = appeals.add_subparsers(dest="action", required=True)
    submit = appeal_actions.add_parser("submit", help="a user's appeal of a decision: stored, and sent out as a review task")
    submit.add_argument("audit_id", metavar="AUDIT_ID", help="the decision's audit record id")
    submit.add_argument("--appellant", required=True, help="who appeals (your own opaque id of the user)")
    submit.add_argument("--statement", default="", help="what the appellant says (at most 5,000 characters)")
    resolve = appeal_actions.add_parser("resolve", help="a reviewer's outcome of an appeal, once")
    resolve.add_argument("appeal_id", metavar="APPEAL_ID", help="the id `appeals submit` printed")
    resolve.add_argument("--outcome", required=True, choices=("upheld", "reversed"))
    resolve.add_argument("--reviewer", required=True, help="who decided")
    resolve.add_argument("--note", default="", help="why (at most 2,000 characters)")
    resolve.add_argument("--text", default="", help="the item's text: the outcome is stored as the item's label for "
                         "the tenant's classifiers (default: the text the audit record kept, if any; else no label)")
    resolve.add_argument("--label", action="append", default=[], metavar="CATEGORY=1|0",
                         help="the item's label for one category (repeat; needs text); default when upheld: each "
                         "category that decided, 1; a reversal needs them named")
    for action in (submit, resolve):
        action.add_argument("--tenant", required=True, help="the tenant the decision belongs to")
        add_admin_arguments(action)
    review = commands.add_parser("review", help="review tasks for your review tool (PolicyAdmin StreamReviewTasks / "
                                 "AckReviewTasks; docs/tenant-classifiers.md)")
    review_actions = review.add_subparsers(dest="action", required=True)
    stream = review_actions.add_parser("stream", help="print a tenant's review tasks as JSON lines, oldest first")
    stream.add_argument("--max", type=int, default=0, metavar="N", help="stop after N tasks (default 0: no limit)")
    stream.add_argument("--seconds", type=float, default=10.0,
                        help="stop after this many seconds (default 10; 0: until interrupted or --max)")
    stream.add_argument("--ack", action="store_true", help="ack each task once printed (default: leave them leased; "
                        "unacked ones come back after --visibility seconds)")
    stream.add_argument("--visibility", type=float, default=60.0, help="seconds a printed task stays leased (default 60)")
    ack = review_actions.add_parser("ack", help="ack tasks your review tool holds (they are deleted)")
    ack.add_argument("task_ids", nargs="+", metavar="TASK_ID", help="the tasks' ids (at most 1,000)")
    for action in (stream, ack):
        action.add_argument("--tenant", required=True, help="the tenant the tasks belong to")
        add_admin_arguments(action)
    tenants = commands.add_parser("tenants", help="what the mesh keeps of tenants (PolicyAdmin)")
    tenant_actions = tenants.add_subparsers(dest="action", required=True)
    purge = tenant_actions.add_parser("purge", help="erase the labels, appeals, review tasks and audit records of a tenant "
                                      "removed from the tenants file (a global admin key)")
    purge.add_argument("tenant", metavar="TENANT", help="the removed tenant's id")
    add_admin_arguments(purge)
    banks = commands.add_parser("banks", help="banks of known content for the match service (docs/matching.md)")
    banks.add_argument("--store", type=Path, default=None,
                       help="the bank store the match service reads (config/match.yaml match.banks_path; default: env "
                       "AUDITMESH_BANKS_PATH, else var/banks.sqlite); with env AUDITMESH_BANKS_DSN set, the banks in "
                       "that PostgreSQL instead (match.banks_dsn; not with --store)")
    bank_actions = banks.add_subparsers(dest="action", required=True)
    create = bank_actions.add_parser("create", help="create a bank (refused when one of that name exists)")
    create.add_argument("name", help="1-64 lower-case letters, digits, '_' or '-'")
    owner = create.add_mutually_exclusive_group(required=True)
    owner.add_argument("--owner", default="", help="the tenant whose content alone is matched against it")
    owner.add_argument("--shared", action="store_true", help="matched against every tenant's content")
    create.add_argument("--category", default="", help="what a match means: a taxonomy category or custom.<name>")
    create.add_argument("--severity", choices=["low", "medium", "high"], default="high")
    create.add_argument("--action", dest="action_", choices=["review", "block"], default="block", help="its default action")
    create.add_argument("--pdq-distance", type=int, default=31, help="PDQ Hamming distance that matches (default 31)")
    create.add_argument("--text-distance", type=int, default=56, help="text SimHash Hamming distance that matches "
                        "(of 256 bits; default 56)")
    create.add_argument("--enabled-ratio", type=float, default=1.0, help="share of content it matches (gradual roll-out)")
    create.add_argument("--negative", action="store_true", help="known-benign: a match suppresses the other banks'")
    add = bank_actions.add_parser("add", help="hash texts and images as the service does and add them")
    add.add_argument("name")
    add.add_argument("--text", action="append", default=[], help="a text (repeatable)")
    add.add_argument("--image", action="append", default=[], type=Path, help="an image file (repeatable)")
    imports_hashes = bank_actions.add_parser("import", help="add the hashes of a hash list (docs/matching.md "
                                             "\"Hash lists\")")
    imports_hashes.add_argument("name")
    imports_hashes.add_argument("file", type=Path)
    imports_hashes.add_argument("--format", dest="format_", choices=BANK_FORMATS, default="csv",
                                help="csv: signal_type,value[,content_id] (default); threatexchange: '<signal_type> "
                                "<signal>' lines; hma_json: HMA's banked-content objects")
    export = bank_actions.add_parser("export", help="print a bank's hashes as a hash list")
    export.add_argument("name")
    export.add_argument("--format", dest="format_", choices=BANK_FORMATS, default="csv")
    remove = bank_actions.add_parser("remove", help="remove hashes: every hash banked under a content id, and hashes "
                                     "by value")
    remove.add_argument("name")
    remove.add_argument("--content-id", action="append", default=[], help="a content id (repeatable)")
    remove.add_argument("--hash", action="append", default=[], metavar="SIGNAL_TYPE:VALUE",
                        help="one hash, e.g. pdq:f8f8... (repeatable)")
    bank_actions.add_parser("list", help="every bank, its version and its hash counts")
    delete = bank_actions.add_parser("delete", help="delete a bank and its hashes")
    delete.add_argument("name")
    return parser


def add_tls_arguments(parser: argparse.ArgumentParser) -> None:
    """--tls, --tls-ca, --tls-cert, --tls-key, --tls-server-name: TLS to the router port the command calls (the
    public port for `moderate`, the admin port for the admin commands), served with the router's certificate."""
    parser.add_argument("--tls", action="store_true", help="connect with TLS, trusting the system's roots (implied by "
                        "--tls-ca or --tls-cert)")
    parser.add_argument("--tls-ca", default=None, metavar="FILE", help="the CA certificate that signed the router's")
    parser.add_argument("--tls-cert", default=None, metavar="FILE", help="this client's certificate (mutual TLS)")
    parser.add_argument("--tls-key", default=None, metavar="FILE", help="this client's private key (mutual TLS)")
    parser.add_argument("--tls-server-name", default="", metavar="NAME",
                        help="the name the router's certificate must carry, when the address does not (an IP)")


def tls_from(args: argparse.Namespace) -> Any:
    """The ClientTls the --tls flags ask for, or None (plaintext). ValueError for a certificate without its key."""
    from auditmesh.client.settings import ClientTls

    if not (args.tls or args.tls_ca or args.tls_cert or args.tls_key):
        return None
    return ClientTls(args.tls_ca, args.tls_cert, args.tls_key, args.tls_server_name)


def add_admin_arguments(parser: argparse.ArgumentParser) -> None:
    """--admin and --admin-key (and the --tls flags), for commands that call the router's admin API."""
    add_tls_arguments(parser)
    parser.add_argument("--admin", default="127.0.0.1:8105", help="the router's PolicyAdmin address, plaintext "
                        "(default 127.0.0.1:8105)")
    parser.add_argument("--admin-key", default=os.environ.get("AUDITMESH_ADMIN_KEY", ""),
                        help="a PolicyAdmin key allowed for the tenant (default: env AUDITMESH_ADMIN_KEY)")


def format_response(response: pb.ModerateResponse) -> str:
    """A readable multi-line summary: decision, categories that fired, evidence, degradations, timings."""
    lines = [f"decision: {pb.Decision.Name(response.decision)}   (item {response.item_id}, policy "
             f"{response.policy_name}@{response.policy_version})"]
    for category in response.categories:
        marker = "" if category.action == pb.ALLOW else f"  -> {pb.Decision.Name(category.action)} ({category.rule})"
        lines.append(f"  {category.category:<24} {category.score:6.3f}  {pb.Severity.Name(category.severity)[9:].lower()}{marker}")
    if response.evidence:
        lines.append("evidence:")
    for evidence in response.evidence:
        kind = evidence.WhichOneof("kind")
        where = f"part {evidence.part_index}"
        if kind == "text_span":
            span = evidence.text_span
            source = f" (OCR line {span.ocr_line_index})" if span.from_ocr else ""
            term = f" blocklist {span.lexicon}: {span.matched_term!r}" if span.matched_term else f" score {span.score:.3f}"
            lines.append(f"  [{evidence.category}] {where}{source} chars {span.start}-{span.end} {span.text!r}{term}")
        elif kind == "ocr_line":
            line = evidence.ocr_line
            polygon = " ".join(f"({p.x},{p.y})" for p in line.polygon)
            lines.append(f"  [{evidence.category}] {where} OCR line {line.line_index}: {line.text!r} conf {line.confidence:.2f} at {polygon}")
        elif kind == "image_score":
            scores = ", ".join(f"{k}={v:.3f}" for k, v in sorted(evidence.image_score.scores.items()))
            lines.append(f"  [{evidence.category or 'scores'}] {where} {evidence.image_score.model}: {scores}")
    for degradation in response.degradations:
        lines.append(f"DEGRADED {degradation.stage}: {degradation.reason} ({degradation.handling})")
    lines.append("timings: " + ", ".join(f"{t.stage} {t.duration_ms:.1f} ms" for t in response.timings))
    lines.append("models: " + ", ".join(f"{m.name}:{m.version}" for m in response.models))
    return "\n".join(lines)


def moderate(args: argparse.Namespace) -> int:
    item = pb.Item(id=args.id or uuid.uuid4().hex[:12])
    for text in args.text:
        item.parts.add(text=text)
    for path in args.image:
        try:
            item.parts.add(image=pb.Image(data=path.read_bytes()))
        except OSError as error:
            print(f"auditmesh: cannot read image {path}: {error.strerror}", file=sys.stderr)
            return 2
    if not item.parts:
        print("auditmesh: give at least one --text or --image", file=sys.stderr)
        return 2
    options = [("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]
    try:
        channel = blocking_channel(args.router, tls_from(args), options)
    except ValueError as error:
        print(f"auditmesh: {error}", file=sys.stderr)
        return 2
    with channel:
        stub = pb_grpc.ModerationServiceStub(channel)
        try:
            response = stub.Moderate(pb.ModerateRequest(request_id=item.id, item=item, policy=args.policy),
                                     metadata=[("x-api-key", args.tenant_key)], timeout=args.timeout)
        except grpc.RpcError as error:
            print(f"auditmesh: {error.code().name}: {error.details()}", file=sys.stderr)
            return 1
    if args.json:
        print(json.dumps(MessageToDict(response, preserving_proto_field_name=True), indent=2, ensure_ascii=False))
    else:
        print(format_response(response))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if hasattr(args, "tls_cert"):
        try:
            tls = tls_from(args)
            if tls is not None:
                tls.credentials()  # the files read now: a wrong path is named before any work
        except ValueError as error:
            print(f"auditmesh: {error}", file=sys.stderr)
            return 2
    if args.command == "hash-key":
        key = args.key or secrets.token_urlsafe(24)
        if not args.key:
            print(f"key:    {key}")
        print(f"sha256: {hash_key(key)}")
        return 0
    if args.command == "classifier":
        return classifier(args)
    if args.command == "labels":
        return labels(args)
    if args.command == "banks":
        return banks(args)
    if args.command == "review":
        return review_command(args)
    if args.command in ("reasons", "appeals", "tenants"):
        return decision_command(args)
    return moderate(args)


def decision_command(args: argparse.Namespace) -> int:
    """`auditmesh reasons`, `auditmesh appeals submit|resolve` and `auditmesh tenants purge`: one PolicyAdmin call,
    its answer printed as JSON, or the refusal (exit 1; exit 2 without an admin key)."""
    from auditmesh.v1 import admin_pb2 as apb
    from auditmesh.v1 import admin_pb2_grpc as apb_grpc

    name = " ".join(filter(None, [args.command, getattr(args, "action", "")]))
    if not args.admin_key:
        print(f"auditmesh {name}: give --admin-key or set AUDITMESH_ADMIN_KEY (a PolicyAdmin key allowed for the tenant)",
              file=sys.stderr)
        return 2
    with blocking_channel(args.admin, tls_from(args), []) as channel:
        stub = apb_grpc.PolicyAdminStub(channel)
        metadata = [("x-admin-key", args.admin_key)]
        try:
            if args.command == "reasons":
                answer: Any = stub.GetStatementOfReasons(apb.GetStatementOfReasonsRequest(
                    tenant=args.tenant, audit_id=args.audit_id), metadata=metadata, timeout=30.0)
            elif args.command == "tenants":
                answer = stub.PurgeTenant(apb.PurgeTenantRequest(tenant=args.tenant), metadata=metadata, timeout=120.0)
            elif args.action == "submit":
                answer = stub.SubmitAppeal(apb.SubmitAppealRequest(tenant=args.tenant, audit_id=args.audit_id,
                                                                   appellant=args.appellant, statement=args.statement),
                                           metadata=metadata, timeout=30.0)
            else:
                labels = parse_labels(args.label)
                if labels is None:
                    print(f"auditmesh {name}: --label takes CATEGORY=1 or CATEGORY=0, got {args.label}", file=sys.stderr)
                    return 2
                answer = stub.ResolveAppeal(apb.ResolveAppealRequest(tenant=args.tenant, appeal_id=args.appeal_id,
                                                                     outcome=args.outcome, reviewer=args.reviewer,
                                                                     note=args.note, text=args.text, labels=labels),
                                            metadata=metadata, timeout=30.0)
        except grpc.RpcError as error:
            print(f"auditmesh {name}: {error.code().name}: {error.details()}", file=sys.stderr)
            return 1
    print(json.dumps(MessageToDict(answer, preserving_proto_field_name=True, always_print_fields_with_no_presence=True),
                     indent=1, ensure_ascii=False))
    return 0


def review_command(args: argparse.Namespace) -> int:
    """`auditmesh review stream|ack`: a tenant's review tasks printed as JSON lines (each acked once printed with
    `--ack`), or an ack of named tasks; the refusal exits 1 (2 without an admin key)."""
    from auditmesh.v1 import admin_pb2 as apb
    from auditmesh.v1 import admin_pb2_grpc as apb_grpc

    if not args.admin_key:
        print(f"auditmesh review {args.action}: give --admin-key or set AUDITMESH_ADMIN_KEY (a PolicyAdmin key allowed "
              "for the tenant)", file=sys.stderr)
        return 2
    metadata = [("x-admin-key", args.admin_key)]
    printed = acked = 0
    acking = False
    with blocking_channel(args.admin, tls_from(args), []) as channel:
        stub = apb_grpc.PolicyAdminStub(channel)
        try:
            if args.action == "ack":
                answer = stub.AckReviewTasks(apb.AckReviewTasksRequest(tenant=args.tenant, task_ids=args.task_ids),
                                             metadata=metadata, timeout=30.0)
                print(json.dumps({"acked": answer.acked}))
                return 0
            request = apb.StreamReviewTasksRequest(tenant=args.tenant, visibility_timeout_s=args.visibility,
                                                   max_unacked=min(1000, args.max) if args.max else 0)
            tasks = stub.StreamReviewTasks(request, metadata=metadata, timeout=args.seconds or None)
            try:
                for task in tasks:
                    print(json.dumps(MessageToDict(task, preserving_proto_field_name=True), ensure_ascii=False), flush=True)
                    printed += 1
                    if args.ack:
                        acking = True
                        acked += stub.AckReviewTasks(apb.AckReviewTasksRequest(tenant=args.tenant, task_ids=[task.task_id]),
                                                     metadata=metadata, timeout=30.0).acked
                        acking = False
                    if args.max and printed >= args.max:
                        break
            finally:
                tasks.cancel()
        except grpc.RpcError as error:
            # the stream's own end (its --seconds) is no failure; a refused call or a failed ack is
            if acking or error.code() not in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED):
                what = "ack" if acking else args.action
                print(f"auditmesh review {what}: {error.code().name}: {error.details()} ({printed} tasks printed, "
                      f"{acked} acked)", file=sys.stderr)
                return 1
    print(f"{printed} tasks printed, {acked} acked", file=sys.stderr)
    return 0


def parse_labels(values: list[str]) -> dict[str, bool] | None:
    """`--label CATEGORY=1|0` values as a label map, or None when one is malformed."""
    labels: dict[str, bool] = {}
    for value in values:
        category, sep, flag = value.partition("=")
        if not sep or not category or flag not in ("1", "0"):
            return None
        labels[category] = flag == "1"
    return labels


def classifier(args: argparse.Namespace) -> int:
    """`auditmesh classifier train|score|evaluate`: print the JSON result, or the problem and exit 2."""
    from services.trainer.artifact import ArtifactError
    from services.trainer.commands import evaluate_file, score_texts, train_examples, train_from_file
    from services.trainer.examples import ExamplesError
    from services.trainer.labels_client import LabelsError, export_examples
    from services.trainer.train import TrainConfig, TrainingError

    try:
        if args.action == "activate":
            return _activate(args)
        if args.action == "train" and args.from_router:
            if not args.admin_key:
                print("auditmesh classifier train: --from-router needs --admin-key or AUDITMESH_ADMIN_KEY", file=sys.stderr)
                return 2
            examples = export_examples(args.tenant, args.admin, admin_key=args.admin_key, tls=tls_from(args))
            print(f"read {len(examples)} labelled items of tenant {args.tenant!r} from the router at {args.admin}",
                  file=sys.stderr)
            if args.nice > 0:
                os.nice(args.nice)
            out = train_examples(examples, tenant=args.tenant, out=args.out, into=None if args.out else args.into,
                                 config=TrainConfig(holdout=args.holdout, seed=args.seed), threads=args.threads,
                                 progress=lambda message: print(message, file=sys.stderr))
        elif args.action == "train":
            out = train_from_file(args.examples, tenant=args.tenant, out=args.out, into=None if args.out else args.into,
                                  config=TrainConfig(holdout=args.holdout, seed=args.seed), threads=args.threads,
                                  nice=args.nice, progress=lambda message: print(message, file=sys.stderr))
        elif args.action == "evaluate":
            out = evaluate_file(args.classifier, args.examples)
        else:
            out = score_texts(args.classifier, args.text)
    except (ExamplesError, TrainingError, ArtifactError, ValueError) as error:
        print(f"auditmesh classifier {args.action}: {error}", file=sys.stderr)
        return 2
    except LabelsError as error:
        print(f"auditmesh classifier {args.action}: {error}", file=sys.stderr)
        return 1
    print(json.dumps(out, indent=1, ensure_ascii=False))
    return 0


def labels(args: argparse.Namespace) -> int:
    """`auditmesh labels import|delete`: print the JSON summary, or the problem (exit 2: the file or the
    arguments; 1: a call the router refused)."""
    from services.trainer.examples import ExamplesError
    from services.trainer.labels_client import LabelsError, delete_labels, import_labels

    if not args.admin_key:
        print(f"auditmesh labels {args.action}: give --admin-key or set AUDITMESH_ADMIN_KEY (a PolicyAdmin key allowed "
              "for the tenant)", file=sys.stderr)
        return 2
    try:
        if args.action == "delete":
            out = delete_labels(args.tenant, args.item_ids, args.admin, admin_key=args.admin_key, tls=tls_from(args))
        else:
            out = import_labels(args.file, args.tenant, args.admin, admin_key=args.admin_key, reviewer=args.reviewer,
                                tls=tls_from(args))
    except ExamplesError as error:
        print(f"auditmesh labels {args.action}: {error}", file=sys.stderr)
        return 2
    except LabelsError as error:
        print(f"auditmesh labels {args.action}: {error}", file=sys.stderr)
        return 1
    print(json.dumps(out, indent=1, ensure_ascii=False))
    return 0


def _activate(args: argparse.Namespace) -> int:
    """`auditmesh classifier activate` (services/trainer/activate.py)."""
    from services.trainer.activate import Activation, ActivationError, Endpoints, InternalSecrets, Stage, activate

    if not args.admin_key:
        print("auditmesh classifier activate: give --admin-key or set AUDITMESH_ADMIN_KEY (a PolicyAdmin key "
              "allowed for the tenant)", file=sys.stderr)
        return 2
    if args.max_disagreement and not args.shadow:
        print("auditmesh classifier activate: --max-disagreement bounds a shadow canary: use it with --shadow",
              file=sys.stderr)
        return 2
    secrets_read = []
    for variable, given, default in (("AUDITMESH_INTERNAL_SECRET", args.internal_secret_file, "var/secrets/internal.secret"),
                                     ("AUDITMESH_INTERNAL_ADMIN_SECRET", args.internal_admin_secret_file,
                                      "var/secrets/internal-admin.secret")):
        value = None if given is not None else os.environ.get(variable)  # a file given on the command line wins
        path = given or Path(os.environ.get(f"{variable}_FILE") or default)
        try:
            secrets_read.append(value or path.read_text(encoding="utf-8").strip())
        except OSError as error:
            print(f"auditmesh classifier activate: cannot read {path}: {error.strerror} (set {variable}[_FILE] or "
                  f"pass the file)", file=sys.stderr)
            return 2
    stage: Stage = "shadow" if args.shadow else "full" if args.full else "canary"
    try:
        out = activate(args.classifier, Activation(args.policy, stage, args.canary if stage == "canary" else 10.0, args.mode,
                                                   args.max_disagreement),
                       Endpoints(args.text, args.admin), admin_key=args.admin_key, admin_tls=tls_from(args),
                       internal=InternalSecrets(*secrets_read))
    except ActivationError as error:
        print(f"auditmesh classifier activate: {error}", file=sys.stderr)
        return 1
    print(json.dumps(out, indent=1, ensure_ascii=False))
    return 0


def banks(args: argparse.Namespace) -> int:
    """`auditmesh banks create|add|import|export|remove|list|delete`: print the JSON result (export: the
    hash list), or the problem and exit 2."""
    from services.common.serving.modality_config import ENV_BANKS_DSN
    from services.match.bank_stores import open_bank_store
    from services.match.banks import BankError, BankSpec, Entry
    from services.match.commands import (add_content, content_entries, create_bank, delete_bank, export_hashes,
                                         import_hashes, list_banks, remove_content)

    from services.router.control.postgres import PostgresUnavailableError

    try:
        dsn = os.environ.get(ENV_BANKS_DSN, "").strip()
        if dsn and args.store is not None:
            print(f"auditmesh banks {args.action}: --store names a file, but {ENV_BANKS_DSN} names PostgreSQL: "
                  f"give one of them", file=sys.stderr)
            return 2
        store = open_bank_store(str(args.store or os.environ.get("AUDITMESH_BANKS_PATH") or "var/banks.sqlite"), dsn)
    except (PostgresUnavailableError, RuntimeError, OSError) as error:
        print(f"auditmesh banks {args.action}: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # PostgreSQL refused what it was asked (a role that may not create the tables)
        print(f"auditmesh banks {args.action}: the bank store could not be opened: {type(error).__name__}: {error}",
              file=sys.stderr)
        return 1
    out: Any
    try:
        if args.action == "create":
            out = create_bank(store, BankSpec(args.name, owner=args.owner, shared=args.shared, category=args.category,
                                              severity=args.severity, action=args.action_, pdq_distance=args.pdq_distance,
                                              text_distance=args.text_distance, enabled_ratio=args.enabled_ratio,
                                              negative=args.negative))
        elif args.action == "add":
            entries = content_entries(texts=[(text, "") for text in args.text],
                                      images=[(path.read_bytes(), path.name) for path in args.image])
            out = add_content(store, args.name, entries)
        elif args.action == "import":
            try:
                out = import_hashes(store, args.name, args.file.read_text(encoding="utf-8"), args.format_)
            except BankError as error:
                raise BankError(f"{args.file}: {error}") from None
        elif args.action == "export":
            sys.stdout.write(export_hashes(store, args.name, args.format_))
            return 0
        elif args.action == "remove":
            hashes = []
            for text in args.hash:
                signal, _, value = text.partition(":")
                hashes.append(Entry(signal, value.lower()))
            out = remove_content(store, args.name, entries=hashes, content_ids=args.content_id)
        elif args.action == "delete":
            out = delete_bank(store, args.name)
        else:
            out = list_banks(store)
    except (BankError, OSError, UnicodeDecodeError) as error:
        print(f"auditmesh banks {args.action}: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # the store's own failure (PostgreSQL gone mid-command): said, not a traceback
        print(f"auditmesh banks {args.action}: the bank store failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    finally:
        store.close()
    print(json.dumps(out, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
