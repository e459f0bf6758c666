FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY trainhub ./trainhub
RUN pip install --no-cache-dir .
COPY . .
RUN SECRET_KEY=build python manage.py collectstatic --noinput
EXPOSE 8000
CMD ["gunicorn", "trainhub.wsgi:application", "--config", "gunicorn.conf.py", "--bind", "0.0.0.0:8000"]
