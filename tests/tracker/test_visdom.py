"""The tracking live view posts its panes to a real visdom server on 127.0.0.1."""

import json

import numpy as np
import pytest

from ltr.admin.ports import free_port
from pytracking.run_tracker import main
from pytracking.visdom_view import FRAME_WIN, SCORE_WIN, STATE_WIN, VisdomView, draw_boxes, score_image
from tests.dataset.fixtures import make_folder_sequence
from tests.tracker.helpers import write_tiny_checkpoint


def test_drawing_helpers():
    img = draw_boxes(
        np.zeros((20, 30, 3), np.uint8), np.array([2.0, 3.0, 10.0, 8.0]), np.array([[1.0, 1, 5, 5]])
    )
    assert img[3, 2:12].tolist() == [[0, 255, 0]] * 10  # green top edge
    assert img.shape == (20, 30, 3) and img.dtype == np.uint8
    s = score_image(np.arange(25.0).reshape(5, 5), size=50)
    assert s.shape == (50, 50, 3) and s[0, 0].tolist() != s[-1, -1].tolist()


def test_no_server_is_a_clear_error(tmp_path, capsys):
    port = free_port()
    with pytest.raises(ConnectionError, match=f"python -m ltr.admin.visdom_server --port {port}"):
        VisdomView(port=port)
    argv = ["dimp", "nce_plus_tiny", "--dataset", "folder", "--root", str(tmp_path), "--net"]
    argv += [str(write_tiny_checkpoint(tmp_path / "t.pth.tar")), "--visdom", "--visdom-port", str(port)]
    assert main(argv) == 2
    assert "ltr.admin.visdom_server" in capsys.readouterr().err


def test_tracking_run_posts_frame_score_map_and_state(tmp_path, capsys):
    import visdom

    from ltr.admin.visdom_server import start_server

    root = tmp_path / "data"
    make_folder_sequence(root, "seq", [[3.0, 2.0, 6.0, 5.0]] * 4)
    ckpt = write_tiny_checkpoint(tmp_path / "tiny.pth.tar")
    server = start_server(free_port(), env_path=tmp_path / "visdom_env")
    try:
        argv = ["dimp", "nce_plus_tiny", "--dataset", "folder", "--root", str(root), "--net", str(ckpt)]
        argv += ["--results", str(tmp_path / "res"), "--device", "cpu", "--no-progress"]
        assert main([*argv, "--visdom", "--visdom-port", str(server.port)]) == 0
        vis = visdom.Visdom(
            server="http://127.0.0.1", port=server.port, raise_exceptions=True, use_incoming_socket=False
        )  # no event socket: its thread printed a signature error (visdom vs websocket-client) at exit
        env = "dimp_nce_plus_tiny"
        for win in (FRAME_WIN, SCORE_WIN, STATE_WIN):
            assert vis.win_exists(win, env=env) is True, win
        state = json.loads(vis.get_window_data(STATE_WIN, env=env))
        assert "seq frame 3: state" in json.dumps(state)
    finally:
        server.close()
