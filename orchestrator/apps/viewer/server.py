"""The viewer's web server: the ``Site``'s pages over HTTP (Starlette, served by uvicorn on
127.0.0.1 by default). It serves the pages, its own two static files and the frame files of
the runs it was given, nothing else: any other path is a 404 page saying so."""

from __future__ import annotations

import logging
import re
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from moria.results import ResultsError
from orchestrator.apps.viewer.export import episode_gif, episode_mp4
from orchestrator.apps.viewer.site import NotFound, Site
from orchestrator.store.episodes import episode_paths

log = logging.getLogger("moria.view")

#: Headers of every answer: the pages run only their own script and load only their own files.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; script-src 'self'; "
                               "style-src 'self'; connect-src 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
#: Video exports: extension -> (encoder of a frame folder, media type).
VIDEOS = {"gif": (episode_gif, "image/gif"), "mp4": (episode_mp4, "video/mp4")}
STATIC_FILES = {"viewer.css": "text/css", "viewer.js": "text/javascript"}
_INDEX = re.compile(r"^\d{1,9}$")
_PAIR = re.compile(r"^(\d{1,6})-(\d{1,6})$")


def _int(text: str, what: str) -> int:
    if not _INDEX.match(text):
        raise NotFound(f"not {what}: {text[:100]!r}")
    return int(text)


def build_app(site: Site) -> Starlette:
    """The Starlette application serving ``site``."""

    def page(html: str, status: int = 200) -> HTMLResponse:
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    async def answer(request: Request, make: Any) -> Response:
        depth = request.url.path.strip("/").count("/")
        try:
            return await run_in_threadpool(make)
        except (NotFound, ResultsError, FileNotFoundError) as exc:
            return page(site.error_page(str(exc), depth), 404)
        except Exception:
            log.exception("viewer: %s failed", request.url.path)
            return page(site.error_page("the viewer failed to build this page; its log says "
                                        "why", depth), 500)

    async def leaderboard(request: Request) -> Response:
        return await answer(request, lambda: page(site.leaderboard_page().html))

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC_FILES:
            return page(site.error_page(f"no static file {name[:100]!r}", 1), 404)
        data = resources.files("orchestrator.apps.viewer").joinpath("static", name).read_bytes()
        return Response(data, media_type=STATIC_FILES[name], headers=SECURITY_HEADERS)

    async def run_page(request: Request) -> Response:
        return await answer(request, lambda: page(site.run_page(
            _int(request.path_params["k"], "a run number")).html))

    async def run_state(request: Request) -> Response:
        def make() -> Response:
            k = _int(request.path_params["k"], "a run number")
            return JSONResponse(site.run_state(k), headers=SECURITY_HEADERS)
        return await answer(request, make)

    async def episode(request: Request) -> Response:
        p = request.path_params
        return await answer(request, lambda: page(site.episode_page(
            _int(p["k"], "a run number"), p["env"], p["task_dir"],
            _int(p["index"], "an episode number")).html))

    async def gif(request: Request) -> Response:
        return await video(request, "gif")

    async def mp4(request: Request) -> Response:
        return await video(request, "mp4")

    async def video(request: Request, kind: str) -> Response:
        p = request.path_params

        def make() -> Response:
            k = _int(p["k"], "a run number")
            record = site.episode(k, p["env"], p["task_dir"], _int(p["index"],
                                                                    "an episode number"))
            if not record.frames:
                raise NotFound("this episode has no saved frames (eval.save_images=true, or "
                               "moria replay --frames)")
            json_path, _ = episode_paths(site.run_dirs[k], record.env, record.task,
                                         record.episode_index)
            encode, media = VIDEOS[kind]
            try:
                data = encode(site.frames_folder(k, json_path.parent / record.frames))
            except ValueError as exc:
                raise NotFound(f"no {kind} of this episode: {exc}") from None
            name = f"{record.env}-{p['task_dir']}-{record.episode_index:02d}.{kind}"
            return Response(data, media_type=media, headers={
                **SECURITY_HEADERS, "Content-Disposition": f'attachment; filename="{name}"'})
        return await answer(request, make)

    async def frame(request: Request) -> Response:
        def make() -> Response:
            k = _int(request.path_params["k"], "a run number")
            path = site.frame_file(k, request.path_params["path"])
            return FileResponse(path, media_type="image/png", headers=SECURITY_HEADERS)
        return await answer(request, make)

    async def compare(request: Request) -> Response:
        def make() -> Response:
            match = _PAIR.match(request.path_params["pair"])
            if not match:
                raise NotFound(f"not a pair of runs: {request.path_params['pair'][:100]!r}")
            return page(site.compare_page(int(match[1]), int(match[2])).html)
        return await answer(request, make)

    async def pair(request: Request) -> Response:
        p = request.path_params

        def make() -> Response:
            match = _PAIR.match(p["pair"])
            if not match:
                raise NotFound(f"not a pair of runs: {p['pair'][:100]!r}")
            seed = p["seed"]
            if not seed.isdigit() or len(seed) > 20:
                raise NotFound(f"not a seed: {seed[:100]!r}")
            return page(site.pair_page(int(match[1]), int(match[2]), p["env"], p["task_dir"],
                                       int(seed)).html)
        return await answer(request, make)

    async def missing(request: Request) -> Response:
        depth = request.url.path.strip("/").count("/")
        return page(site.error_page(f"no page {request.url.path[:200]!r}", depth), 404)

    routes = [
        Route("/", leaderboard), Route("/index.html", leaderboard),
        Route("/static/{name}", static),
        Route("/runs/{k}/", run_page), Route("/runs/{k}/index.html", run_page),
        Route("/runs/{k}/state.json", run_state),
        Route("/runs/{k}/episodes/{env}/{task_dir}/{index}.html", episode),
        Route("/runs/{k}/episodes/{env}/{task_dir}/{index}.gif", gif),
        Route("/runs/{k}/episodes/{env}/{task_dir}/{index}.mp4", mp4),
        Route("/runs/{k}/files/{path:path}", frame),
        Route("/compare/{pair}.html", compare),
        Route("/compare/{pair}/{env}/{task_dir}/{seed}.html", pair),
        Route("/{rest:path}", missing),
    ]
    return Starlette(routes=routes)
